package agg

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

var _ stream.StateRecorder = (*Operator)(nil)

// CommittedRecord reads what state version version records (the watermark
// NextWatermark gave for it, the state schema) from its metadata file alone
// (stream.StateRecorder); the operator need not be open.
func (o *Operator) CommittedRecord(_ context.Context, fs vfs.FS, stateDir string, version int64) (stream.StateRecord, bool, error) {
	r, ok, err := state.ReadRecord(fs, stateDir, version)
	if err != nil || !ok {
		return stream.StateRecord{Newest: r.Newest}, ok, err
	}
	return stream.StateRecord{Path: r.Path, NextWatermarkMs: r.NextWatermarkMs, HasNextWatermark: r.HasNextWatermark,
		StateSchema: r.Schema.String(), Newest: r.Newest}, true, nil
}
