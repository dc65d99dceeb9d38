package session

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ethstream/ethstream/errcode"
)

// The session operator's record of a state version (doc.go, Operator
// record): bytes the state store keeps in the version's metadata without
// reading them (state.Store.SetOperatorRecord), one line of JSON:
//
//	{"session":1}
//	{"session":1,"legacyZeroDelay":true}
//
// "session" is the record's format (1; never renumbered). A version
// without a record was written by a build that read a watermark delay of 0
// as no watermark; legacyZeroDelay says the version was written under that
// rule still, which a checkpoint begun by such a build keeps (doc.go,
// Watermark delay 0). Its field names are not the aggregation's, so no
// reader takes one for the other. Anything else is CHECKPOINT_CORRUPT.

// opRecordFormat is the record format this build writes and reads.
const opRecordFormat = 1

// opRecord is one state version's record.
type opRecord struct {
	Format          int  `json:"session"`
	LegacyZeroDelay bool `json:"legacyZeroDelay,omitempty"`
}

// zeroDelayIsNone says the version was written under the rule that a
// watermark delay of 0 is no watermark.
func (r opRecord) zeroDelayIsNone() bool { return r.Format == 0 || r.LegacyZeroDelay }

func (r opRecord) encode() []byte {
	r.Format = opRecordFormat
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("session: marshal operator record: %v", err))
	}
	return b
}

// decodeOpRecord reads a version's record (nil: the version has none).
func decodeOpRecord(b []byte, path string) (opRecord, error) {
	var r opRecord
	if b == nil {
		return r, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || dec.More() {
		return opRecord{}, errcode.Corrupt(path, err, "decode the session window aggregation's record of the state version")
	}
	if r.Format != opRecordFormat {
		return opRecord{}, errcode.Corrupt(path, nil, "the session window aggregation's record of the state version has format %d; this build reads %d",
			r.Format, opRecordFormat)
	}
	return r, nil
}
