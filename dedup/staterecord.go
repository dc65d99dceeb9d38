package dedup

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

var _ stream.StateRecorder = (*Operator)(nil)

// CommittedRecord reads what state version version records for a start's
// checks (stream.StateRecorder): the state schema it was written with and
// the newest version, from its metadata alone, the operator need not be
// open. The start compares them with the query shape record and the
// commit log as checkpoint verify does.
func (o *Operator) CommittedRecord(ctx context.Context, fs vfs.FS, stateDir string, version int64) (stream.StateRecord, bool, error) {
	return state.Recorded{}.CommittedRecord(ctx, fs, stateDir, version)
}
