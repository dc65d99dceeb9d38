package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/durable"
)

// gcRemovesPerCommit bounds the files the collection after a snapshot
// deletes per commit: a version adds two files (data and metadata), so 4
// per commit removes twice what a commit adds, a snapshot's garbage (two
// files a delta of the chain it ends: 2 x SnapshotEvery up to 20 x, by
// chainDue's rule) drains in half as many commits as the chain had
// deltas, and no commit pays for all of it at once.
const gcRemovesPerCommit = 4

// gcVictim is one state file to delete.
type gcVictim struct {
	v    int64
	rank int // deletion order within a version: 0 .meta, 1 .snapmeta, 2 data
	name string
}

// gc deletes, at once, the state files no retained version needs
// (gcVictims).
func (s *Store) gc() error {
	victims, err := s.gcVictims()
	if err != nil {
		return err
	}
	s.gcQueue = victims
	return s.drainGC(len(victims))
}

// gcVictims lists the state files no retained version needs (doc.go,
// "Garbage"):
//   - every file of versions above the store's version (an abandoned history:
//     the engine re-ran a batch whose state had been committed),
//   - every attempt of a version other than its newest metadata attempt,
//   - every version below the snapshot that starts the chain of the oldest
//     retained version (s.version - Retain), a background snapshot
//     included: the deltas below it are then garbage.
//
// A background snapshot in flight keeps the chain it reads (its floor) and
// its own version's files. They are ordered newest version first, then
// .meta, .snapmeta, data, so a crash in the middle of deleting them leaves
// only loadable versions or versions without metadata, and never a
// .snapmeta without its .snap.
func (s *Store) gcVictims() ([]gcVictim, error) {
	cat, err := listCatalog(s.fs, s.dir)
	if err != nil {
		return nil, err
	}
	floor := int64(0)
	oldest := s.version - int64(s.opts.Retain)
	for _, v := range cat.versions() {
		if v < oldest || v > s.version {
			continue
		}
		chain, err := loadChain(s.fs, s.dir, cat, v)
		if err != nil {
			return nil, err
		}
		floor = chain[0].Version
		break
	}
	if s.maint != nil {
		floor = min(floor, s.maint.floor)
	}
	var victims []gcVictim
	for _, name := range cat.files {
		v, a, suf, _ := parseFileName(name)
		latest, hasMeta := cat.latestAttempt(v)
		drop := v > s.version || v < floor || !hasMeta || a != latest
		if drop && !s.maintaining(v) {
			victims = append(victims, gcVictim{v, gcRank(suf), name})
		}
	}
	sort.Slice(victims, func(i, j int) bool {
		if victims[i].v != victims[j].v {
			return victims[i].v > victims[j].v
		}
		return victims[i].rank < victims[j].rank
	})
	return victims, nil
}

// gcRank orders the deletion of one version's files: a version stops
// being committed first, its background snapshot stops being one second.
func gcRank(suffix string) int {
	switch suffix {
	case "meta":
		return 0
	case "snapmeta":
		return 1
	}
	return 2
}

// maintaining reports whether the background snapshot in flight writes
// files of version v: they are not garbage while it runs.
func (s *Store) maintaining(v int64) bool { return s.maint != nil && s.maint.target.Version == v }

// drainGC deletes up to n files from the front of the queue, and syncs the
// directory once the queue is empty. Every queued file stays garbage: a
// version below the floor or a superseded attempt is never needed again,
// and the queue is computed anew at each snapshot.
func (s *Store) drainGC(n int) error {
	removed := 0
	for ; removed < n && len(s.gcQueue) > 0; removed++ {
		vc := s.gcQueue[0]
		if s.maintaining(vc.v) {
			// Queued before the snapshot of v started; the queue is
			// computed anew when it ends.
			s.gcQueue = s.gcQueue[1:]
			continue
		}
		if err := s.fs.Remove(s.fs.PathJoin(s.dir, vc.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.gcQueue = nil
			return fmt.Errorf("remove state file %s: %w", s.fs.PathJoin(s.dir, vc.name), err)
		}
		s.gcQueue = s.gcQueue[1:]
	}
	if removed > 0 && len(s.gcQueue) == 0 {
		s.gcQueue = nil
		return syncDir(s.fs, s.dir)
	}
	return nil
}

// marker is the local cache's claim: "these Pebble directories hold exactly
// this version of this store".
type marker struct {
	Gen           string  `json:"gen"` // the generation directory holding the instances
	StoreID       string  `json:"storeId"`
	Version       int64   `json:"version"`
	Attempt       int     `json:"attempt"`
	Partitions    int     `json:"partitions"`
	PartitionRows []int64 `json:"partitionRows"`
}

func decodeMarker(b []byte) (*marker, error) {
	rest, ok := bytes.CutPrefix(b, []byte(localMarkerMagicLine+"\n"))
	if !ok {
		return nil, errors.New("bad cache marker header")
	}
	m := &marker{}
	if err := json.Unmarshal(rest, m); err != nil {
		return nil, err
	}
	return m, nil
}

// writeMarker publishes the marker after the closed, flushed cache is on
// disk. Pebble's own syncs are disabled (noSyncFS), so one syncfs(2) of
// the cache's filesystem first makes its files durable before the marker
// can claim them.
func (s *Store) writeMarker() error {
	syncCacheFS(s.opts.LocalDir)
	js, err := json.Marshal(marker{
		Gen: s.parts.gen, StoreID: s.storeID, Version: s.head.Version, Attempt: s.head.Attempt,
		Partitions: s.n, PartitionRows: s.head.PartitionRows,
	})
	if err != nil {
		return err
	}
	_, _, err = publishFile(vfs.Default, s.opts.LocalDir, markerName, durable.Replace, func(w io.Writer) error {
		if _, err := io.WriteString(w, localMarkerMagicLine+"\n"); err != nil {
			return err
		}
		_, err := w.Write(js)
		return err
	})
	if err != nil {
		return fmt.Errorf("write state cache marker: %w", err)
	}
	return nil
}
