package deltasource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ethstream/ethstream/stream"
)

// baseIndex is Delta's on-disk index before a version's first file.
const baseIndex = -1

// position is Delta's DeltaSourceOffset without the table id: a point in
// the stream of files, ordered by (version, index). With starting true it
// is a point in the initial snapshot at version (its files numbered in
// (modificationTime, path) order); otherwise in the commit of version
// (its data-changing add actions in commit order). index -1 is before the
// version's first file.
type position struct {
	version  int64
	index    int64
	starting bool
}

// offsetJSON is Delta's DeltaSourceOffset as Spark writes it to the offset
// log, field for field and in this order.
type offsetJSON struct {
	SourceVersion     int64  `json:"sourceVersion"`
	ReservoirID       string `json:"reservoirId"`
	ReservoirVersion  int64  `json:"reservoirVersion"`
	Index             int64  `json:"index"`
	IsStartingVersion bool   `json:"isStartingVersion"`
}

// formatOffset renders Delta's offset JSON for the table id and p.
func formatOffset(tableID string, p position) stream.Offset {
	b, err := json.Marshal(offsetJSON{SourceVersion: 1, ReservoirID: tableID, ReservoirVersion: p.version, Index: p.index, IsStartingVersion: p.starting})
	if err != nil {
		panic(fmt.Sprintf("deltasource: marshal offset: %v", err))
	}
	return b
}

// parseOffset parses a Delta source offset. Source versions 1 to 3 are
// Delta's; this reader refuses the schema-tracking barrier indexes (-20,
// -19) that versions above 1 add, and anything newer.
func parseOffset(o stream.Offset) (string, position, error) {
	var j struct {
		SourceVersion     *int64  `json:"sourceVersion"`
		ReservoirID       *string `json:"reservoirId"`
		ReservoirVersion  *int64  `json:"reservoirVersion"`
		Index             *int64  `json:"index"`
		IsStartingVersion *bool   `json:"isStartingVersion"`
	}
	dec := json.NewDecoder(bytes.NewReader(o))
	if err := dec.Decode(&j); err != nil || dec.More() {
		return "", position{}, fmt.Errorf("parse delta source offset %q: not a JSON object", string(o))
	}
	if j.SourceVersion == nil || j.ReservoirID == nil || j.ReservoirVersion == nil || j.Index == nil || j.IsStartingVersion == nil {
		return "", position{}, fmt.Errorf("parse delta source offset %q: sourceVersion, reservoirId, reservoirVersion, index and isStartingVersion are required", string(o))
	}
	if *j.SourceVersion < 1 || *j.SourceVersion > 3 {
		return "", position{}, fmt.Errorf("parse delta source offset %q: sourceVersion %d is not one this reader knows (1 to 3)", string(o), *j.SourceVersion)
	}
	if *j.Index < baseIndex || *j.ReservoirVersion < 0 {
		return "", position{}, fmt.Errorf("parse delta source offset %q: index %d at version %d (a schema-tracking barrier, or out of range) is not supported",
			string(o), *j.Index, *j.ReservoirVersion)
	}
	return *j.ReservoirID, position{version: *j.ReservoirVersion, index: *j.Index, starting: *j.IsStartingVersion}, nil
}

// after reports whether a is after b in stream order.
func (a position) after(b position) bool {
	if a.version != b.version {
		return a.version > b.version
	}
	if a.starting != b.starting {
		return !a.starting // a version's snapshot comes before its commit's files
	}
	return a.index > b.index
}

func (p position) String() string {
	return "version " + strconv.FormatInt(p.version, 10) + " index " + strconv.FormatInt(p.index, 10)
}
