package agg

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

var _ stream.StateRecorder = (*Operator)(nil)

// CommittedRecord reads what state version version records (the watermark
// NextWatermark gave for it, the state schema) from its metadata file alone
// (stream.StateRecorder); the operator need not be open.
func (o *Operator) CommittedRecord(_ context.Context, fs vfs.FS, stateDir string, version int64) (stream.StateRecord, bool, error) {
	return ReadStateRecord(fs, stateDir, version)
}

// ReadStateRecord is CommittedRecord for any aggregation's state under
// stateDir: the state schema and the operator record of version's
// metadata, writing nothing; ok is false when version has no metadata.
func ReadStateRecord(fs vfs.FS, stateDir string, version int64) (stream.StateRecord, bool, error) {
	r, ok, err := state.ReadRecord(fs, stateDir, version)
	if err != nil || !ok {
		return stream.StateRecord{Newest: r.Newest}, ok, err
	}
	rec, err := decodeOpRecord(r.Operator, r.Path)
	if err != nil {
		return stream.StateRecord{}, false, err
	}
	sr := stream.StateRecord{Path: r.Path, StateSchema: r.Schema.String(), Newest: r.Newest}
	if rec.NextWatermarkMs != nil {
		sr.NextWatermarkMs, sr.HasNextWatermark = *rec.NextWatermarkMs, true
	}
	return sr, true, nil
}

// VerifyCarry reads and checks the closed-at-commit carry that state
// version version under stateDir names (carryfile.go: its size, header,
// footer, checksums and record count), for `checkpoint verify`; found is
// false when the version names none (or its record is not an
// aggregation's). A carry file that is gone or does not verify is
// CHECKPOINT_CORRUPT: the run keeps the carry files of the last two
// committed versions, and falls back to the late-floor rule with a
// warning when one is gone (doc.go, Closed at commit).
func VerifyCarry(fs vfs.FS, stateDir string, version int64) (found bool, err error) {
	r, ok, err := state.ReadRecord(fs, stateDir, version)
	if err != nil || !ok {
		return false, err
	}
	rec, err := decodeOpRecord(r.Operator, r.Path)
	if err != nil || !rec.hasCarry() {
		return false, nil
	}
	if rec.CarryFile != "" {
		path := fs.PathJoin(stateDir, rec.CarryFile)
		if _, err := fs.Stat(path); err != nil {
			return true, errcode.Corrupt(path, err, "the closed-at-commit carry that state version %d names is gone", version)
		}
	}
	_, err = readCarry(fs, stateDir, version, rec)
	return true, err
}
