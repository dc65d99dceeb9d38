package opbase

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// StateRecord gives an operator whose state metadata holds all a start
// checks (its schema and newest version) the stream.StateRecorder method:
// embedded in the operator, it answers from the metadata alone, so the
// operator need not be open. The aggregation records more (its next
// watermark) and has its own.
type StateRecord struct{}

// CommittedRecord reads what state version version records for a start's
// checks (stream.StateRecorder); the start compares it with the query
// shape record and the commit log as checkpoint verify does.
func (StateRecord) CommittedRecord(ctx context.Context, fs vfs.FS, stateDir string, version int64) (stream.StateRecord, bool, error) {
	return state.Recorded{}.CommittedRecord(ctx, fs, stateDir, version)
}
