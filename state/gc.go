package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/durable"
)

// gc deletes state files no retained version needs (doc.go, "Garbage"):
//   - every file of versions above the store's version (an abandoned history:
//     the engine re-ran a batch whose state had been committed),
//   - every attempt of a version other than its newest metadata attempt,
//   - every version below the snapshot that starts the chain of the oldest
//     retained version (s.version - Retain).
//
// Files go newest version first and metadata before data, so a crash in the
// middle leaves only loadable versions or versions without metadata.
func (s *Store) gc() error {
	cat, err := listCatalog(s.fs, s.dir)
	if err != nil {
		return err
	}
	floor := int64(0)
	oldest := s.version - int64(s.opts.Retain)
	for _, v := range cat.versions() {
		if v < oldest || v > s.version {
			continue
		}
		chain, err := loadChain(s.fs, s.dir, cat, v)
		if err != nil {
			return err
		}
		floor = chain[0].Version
		break
	}
	type victim struct {
		v    int64
		meta bool
		name string
	}
	var victims []victim
	for _, name := range cat.files {
		v, a, suf, _ := parseFileName(name)
		latest, hasMeta := cat.latestAttempt(v)
		drop := v > s.version || v < floor || !hasMeta || a != latest
		if drop {
			victims = append(victims, victim{v, suf == "meta", name})
		}
	}
	sort.Slice(victims, func(i, j int) bool {
		if victims[i].v != victims[j].v {
			return victims[i].v > victims[j].v
		}
		return victims[i].meta && !victims[j].meta
	})
	for _, vc := range victims {
		if err := s.fs.Remove(s.fs.PathJoin(s.dir, vc.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove state file %s: %w", s.fs.PathJoin(s.dir, vc.name), err)
		}
	}
	if len(victims) > 0 {
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
// disk. Pebble's own syncs are disabled (noSyncFS), so one sync(2) first
// makes its files durable before the marker can claim them.
func (s *Store) writeMarker() error {
	syscall.Sync()
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
