package stream

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// StateRecord is what an operator's committed state version records that
// another file of the checkpoint records too, for the engine to compare
// before a start writes anything.
type StateRecord struct {
	// Path is the file that records it (named in errors).
	Path string
	// NextWatermarkMs is the watermark of the batch after the version, the
	// value WatermarkLookahead gave; HasNextWatermark is false for a version
	// that does not record it (written by an older version of the operator).
	NextWatermarkMs  int64
	HasNextWatermark bool
	// StateSchema is the state schema the version was written with, as the
	// operator renders it in the query shape ("" if unknown).
	StateSchema string
	// Newest is the newest version stateDir holds (-1: none), for the
	// engine to compare with the logs (checkpoint.Dir.CheckStateCovered).
	Newest int64
}

// StateRecorder is implemented by operators whose committed state records
// facts that the checkpoint's logs record too. CommittedRecord reads them
// for state version version under stateDir without opening the operator or
// writing anything; ok is false when that version has no record (rec then
// holds Newest alone).
type StateRecorder interface {
	CommittedRecord(ctx context.Context, fs vfs.FS, stateDir string, version int64) (rec StateRecord, ok bool, err error)
}
