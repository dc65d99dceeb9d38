package delta

// What the table records of the queries that write it, read before a start
// writes anything, and the check that no MERGE commits over a missing file.

import (
	"context"
	"errors"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

var _ stream.IdentifiedSink = (*MergeSink)(nil)

// OutputID returns the table's metadata id (the metaData action's id, which
// Delta keeps for the table's life whatever its path), "" when the directory
// holds no table yet. It creates and writes nothing.
func (m *MergeSink) OutputID(ctx context.Context) (string, error) {
	t, err := OpenFS(ctx, m.o.FS, m.o.Path)
	if errcode.Is(err, CodeNotATable) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		return "", err
	}
	return s.Metadata.ID, nil
}

// RecordedBatches returns the txn version of every appId of the latest
// snapshot (nil when the directory holds no table yet), after checking that
// every live data file exists (DELTA_MISSING_FILE otherwise). It creates and
// writes nothing.
func (m *MergeSink) RecordedBatches(ctx context.Context) (map[string]int64, error) {
	t, err := OpenFS(ctx, m.o.FS, m.o.Path)
	var ce *errcode.Error
	if errors.As(err, &ce) && ce.Code == CodeNotATable {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		return nil, err
	}
	if err := s.checkFiles(s.Files()); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(s.txns))
	for id, txn := range s.txns {
		out[id] = txn.Version
	}
	return out, nil
}

// checkLiveFiles stats the live files of s that this sink has not seen
// exist yet (those another writer added since), so that a MERGE never
// commits on top of a table that references a missing file. Files the sink
// wrote or checked are remembered: the cost per batch follows the files that
// are new to it, not the table's size.
func (m *MergeSink) checkLiveFiles(s *Snapshot) error {
	if m.seen == nil {
		m.seen = map[string]struct{}{}
	}
	var fresh []AddFile
	for p, f := range s.files {
		if _, ok := m.seen[p]; !ok {
			fresh = append(fresh, *f)
		}
	}
	if err := s.checkFiles(fresh); err != nil {
		return err
	}
	for p := range s.files {
		m.seen[p] = struct{}{}
	}
	return nil
}
