package agg

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ethstream/ethstream/errcode"
)

// The aggregation's record of a state version (doc.go, Operator record):
// bytes the state store keeps in the version's metadata without reading
// them (state.Store.SetOperatorRecord).

// Record formats, never renumbered: 0 is the oldest, the JSON object of
// state metadata formats 3 and 4's two fields, which carries no format
// field; 1 names it; 2 adds a version's carry (carryfile.go); 3, the one
// this build writes for every version, says a watermark delay of 0 is a
// watermark (doc.go, Watermark delay 0): a record of an older format was
// written by a build that read a delay of 0 as no watermark.
const (
	opRecordFormatPlain = 1
	opRecordFormatCarry = 2
	opRecordFormatZero  = 3
	// opRecordFormat is the newest format a read accepts, the one encode
	// writes.
	opRecordFormat = opRecordFormatZero
)

// opRecord is one state version's record.
type opRecord struct {
	// Format is opRecordFormat (absent: format 0).
	Format int `json:"format,omitempty"`
	// ClosedRows counts the rows of the version not stored because the
	// next watermark closes them (doc.go, Closed at commit).
	ClosedRows int64 `json:"closedRows,omitempty"`
	// NextWatermarkMs is the watermark of the batch after the version
	// (NextWatermark), nil when it was not given: the value commits/<v>
	// records as nextBatchWatermarkMs.
	NextWatermarkMs *int64 `json:"nextWatermarkMs,omitempty"`
	// Carry holds the records of the version's carry when they are few
	// (format 2; carryfile.go), CarryFile and CarryBytes name the file
	// holding them otherwise (a path relative to the state directory).
	Carry      []byte `json:"carry,omitempty"`
	CarryFile  string `json:"carryFile,omitempty"`
	CarryBytes int64  `json:"carryBytes,omitempty"`
	// LegacyZeroDelay (format 3) says the version was written by a query
	// whose watermark delay of 0 was read as no watermark, the rule of the
	// builds before format 3, which a checkpoint they began keeps
	// (doc.go, Watermark delay 0).
	LegacyZeroDelay bool `json:"legacyZeroDelay,omitempty"`
}

// zeroDelayIsNone says the version was written under the rule that a
// watermark delay of 0 is no watermark: by a build before format 3, or
// by one that kept that rule for the checkpoint.
func (r opRecord) zeroDelayIsNone() bool { return r.Format < opRecordFormatZero || r.LegacyZeroDelay }

// hasCarry says the record names the version's carry.
func (r opRecord) hasCarry() bool { return r.Carry != nil || r.CarryFile != "" }

// encode renders r in format opRecordFormat.
func (r opRecord) encode() []byte {
	r.Format = opRecordFormat
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("agg: marshal operator record: %v", err))
	}
	return b
}

// decodeOpRecord reads a version's record (nil: the version has none, as
// versions written before records or without a watermark lookahead).
// Anything but a record of a known format is CHECKPOINT_CORRUPT naming
// path.
func decodeOpRecord(b []byte, path string) (opRecord, error) {
	var r opRecord
	if b == nil {
		return r, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || dec.More() {
		return opRecord{}, errcode.Corrupt(path, err, "decode the aggregation's record of the state version")
	}
	if r.Format < 0 || r.Format > opRecordFormat {
		return opRecord{}, errcode.Corrupt(path, nil, "the aggregation's record of the state version has format %d; this build reads up to %d",
			r.Format, opRecordFormat)
	}
	if r.ClosedRows < 0 {
		return opRecord{}, errcode.Corrupt(path, nil, "the aggregation's record of the state version has closedRows %d", r.ClosedRows)
	}
	switch {
	case r.hasCarry() && r.Format < opRecordFormatCarry:
		return opRecord{}, errcode.Corrupt(path, nil, "the aggregation's record of the state version names a carry in format %d", r.Format)
	case r.LegacyZeroDelay && r.Format < opRecordFormatZero:
		return opRecord{}, errcode.Corrupt(path, nil, "the aggregation's record of the state version says legacyZeroDelay in format %d", r.Format)
	case r.Carry != nil && r.CarryFile != "", r.hasCarry() && (r.ClosedRows == 0 || r.NextWatermarkMs == nil):
		return opRecord{}, errcode.Corrupt(path, nil, "the aggregation's record of the state version names a carry it cannot have")
	case r.CarryFile != "" && (!validCarryFile(r.CarryFile) || r.CarryBytes < carryHeaderSize+carryFooterSize),
		r.CarryFile == "" && r.CarryBytes != 0:
		return opRecord{}, errcode.Corrupt(path, nil, "the aggregation's record of the state version names carry file %q of %d bytes", r.CarryFile, r.CarryBytes)
	}
	return r, nil
}
