package state

// The record of a background snapshot (doc.go, "Background snapshots"): a
// .snapmeta file beside the .snap it describes, published after it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

const (
	snapMetaHeader = "ethstream-state-snapmeta v1"
	// snapMetaFormatVersion is the only .snapmeta format so far.
	snapMetaFormatVersion = 1
)

// snapMeta is the .snapmeta file of a background snapshot of one committed
// delta version (doc.go).
type snapMeta struct {
	FormatVersion int    `json:"formatVersion"`
	StoreID       string `json:"storeId"`
	Version       int64  `json:"version"`
	Attempt       int    `json:"attempt"`
	Data          string `json:"data"`
	DataSize      int64  `json:"dataSize"`
	DataRecords   int64  `json:"dataRecords"`
	Partitions    int    `json:"partitions"`
	Rows          int64  `json:"rows"`
}

func snapMetaFileName(v int64, attempt int) string {
	return fmt.Sprintf("%020d.%d.snapmeta", v, attempt)
}

func encodeSnapMeta(sm *snapMeta) []byte { return encodeFrame(snapMetaHeader, sm) }

func decodeSnapMeta(b []byte) (*snapMeta, error) {
	body, err := frameBody(b, snapMetaHeader, "ethstream-state-snapmeta v")
	if err != nil {
		return nil, err
	}
	sm := &snapMeta{}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(sm); err != nil {
		return nil, fmt.Errorf("parse snapshot metadata json: %w", err)
	}
	if sm.FormatVersion != snapMetaFormatVersion {
		return nil, fmt.Errorf("unsupported snapshot metadata formatVersion %d", sm.FormatVersion)
	}
	if sm.Version < 0 || sm.Attempt < 0 || sm.Partitions <= 0 || sm.Partitions > maxPartitions ||
		sm.DataSize < headerLen+footerLen || sm.DataRecords != sm.Rows || sm.Rows < 0 {
		return nil, errors.New("snapshot metadata fields out of range")
	}
	if sm.Data != dataFileName(sm.Version, sm.Attempt, kindNameSnapshot) {
		return nil, fmt.Errorf("data file name %q does not match version %d attempt %d", sm.Data, sm.Version, sm.Attempt)
	}
	return sm, nil
}

// readSnapMeta reads and verifies the .snapmeta of attempt a of version v
// against m, that attempt's own metadata: a record that does not describe
// exactly m's state (store, partitions, rows) is CHECKPOINT_CORRUPT naming
// the .snapmeta, never used.
func readSnapMeta(fs vfs.FS, dir string, m *versionMeta) (*snapMeta, error) {
	path := fs.PathJoin(dir, snapMetaFileName(m.Version, m.Attempt))
	f, err := fs.Open(path)
	if err != nil {
		return nil, errcode.Corrupt(path, err, "open state snapshot metadata of version %d", m.Version)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, errcode.Corrupt(path, err, "read state snapshot metadata of version %d", m.Version)
	}
	sm, err := decodeSnapMeta(b)
	if err != nil {
		return nil, errcode.Corrupt(path, err, "decode state snapshot metadata")
	}
	if sm.Version != m.Version || sm.Attempt != m.Attempt || sm.StoreID != m.StoreID ||
		sm.Partitions != m.Partitions || sm.Rows != m.Rows {
		return nil, errcode.Corrupt(path, nil,
			"state snapshot metadata (version %d attempt %d store %s, %d rows in %d partitions) does not match version %d attempt %d (store %s, %d rows in %d partitions)",
			sm.Version, sm.Attempt, sm.StoreID, sm.Rows, sm.Partitions, m.Version, m.Attempt, m.StoreID, m.Rows, m.Partitions)
	}
	return sm, nil
}

// standIn returns the metadata a chain uses for version m when its
// background snapshot sm starts the chain: m with the snapshot as its data
// file and no base. own keeps m itself, the version's committed metadata.
func (sm *snapMeta) standIn(m *versionMeta) *versionMeta {
	c := *m
	c.Kind, c.Data, c.DataSize, c.DataRecords = kindNameSnapshot, sm.Data, sm.DataSize, sm.DataRecords
	c.Base, c.ChainLength, c.ChainBytes = nil, 0, 0
	c.own = m
	return &c
}
