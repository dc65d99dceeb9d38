package agg

import (
	"context"
	"errors"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
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
	c := CheckStateVersion(fs, stateDir, version)
	return c.Record, c.OK, c.Err
}

// StateCheck is what CheckStateVersion found of one state version.
type StateCheck struct {
	// Record, OK and Err are ReadStateRecord's answer.
	Record stream.StateRecord
	OK     bool
	Err    error
	// Carry and CarryErr are VerifyCarry's.
	Carry    CarryState
	CarryErr error
}

// CheckStateVersion is ReadStateRecord and VerifyCarry of version in one
// read of its metadata and its carry (`checkpoint verify` asks both of the
// last committed version; it read a carry file of megabytes twice).
func CheckStateVersion(fs vfs.FS, stateDir string, version int64) StateCheck {
	r, ok, err := state.ReadRecord(fs, stateDir, version)
	if err != nil || !ok {
		return StateCheck{Record: stream.StateRecord{Newest: r.Newest}, OK: ok, Err: err, CarryErr: err}
	}
	rec, err := decodeOpRecord(r.Operator, r.Path)
	if err != nil {
		// Another operator's record: it names no carry of ours.
		return StateCheck{Err: err}
	}
	// What verify flags a start refuses: a carry that does not verify is
	// damage in both; one that is gone is the run's documented fallback.
	c := StateCheck{}
	c.Carry, c.CarryErr = checkCarry(fs, stateDir, version, rec)
	if c.CarryErr != nil {
		c.Err = c.CarryErr
		return c
	}
	c.Record = stream.StateRecord{Path: r.Path, StateSchema: r.Schema.String(), Newest: r.Newest}
	if rec.NextWatermarkMs != nil {
		c.Record.NextWatermarkMs, c.Record.HasNextWatermark = *rec.NextWatermarkMs, true
	}
	c.OK = true
	return c
}

// CarryState is what VerifyCarry found of a state version's carry.
type CarryState int

const (
	// CarryNone: the version's record names no carry.
	CarryNone CarryState = iota
	// CarryGood: the carry is in the record or its file, and verifies.
	CarryGood
	// CarryGone: the record names a carry file that is not there (the run
	// keeps the last two committed versions' files; for an older version
	// the batch after it falls back to the late-floor rule with a warning).
	CarryGone
)

// VerifyCarry reads and checks the closed-at-commit carry that state
// version version under stateDir names (carryfile.go: its size, header,
// footer, checksums and record count), for `checkpoint verify`. A carry
// that does not verify is CHECKPOINT_CORRUPT, as a start that resumes
// from the version reports it (ReadStateRecord); one that is gone is
// CarryGone, not an error: the run falls back (doc.go, Closed at commit).
func VerifyCarry(fs vfs.FS, stateDir string, version int64) (CarryState, error) {
	c := CheckStateVersion(fs, stateDir, version)
	return c.Carry, c.CarryErr
}

// checkCarry reads and checks rec's carry (version's), writing nothing.
func checkCarry(fs vfs.FS, stateDir string, version int64, rec opRecord) (CarryState, error) {
	if !rec.hasCarry() {
		return CarryNone, nil
	}
	// No stat first: a file removed between a stat and readCarry's open
	// gave a raw open error. readCarry's one open tells gone from there.
	if _, err := readCarry(fs, stateDir, version, rec); errors.Is(err, os.ErrNotExist) {
		return CarryGone, nil
	} else if err != nil {
		return CarryGood, err
	}
	return CarryGood, nil
}
