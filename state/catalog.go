package state

// The catalog of a state directory: which versions and attempts exist, and
// the metadata chain that reconstructs a version.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// catalog is the listing of a state directory: every metadata file by version
// and attempt, and every other state file.
type catalog struct {
	metas map[int64][]int     // version -> attempts with a .meta file, ascending
	snaps map[versionRef]bool // attempts with a background snapshot's .snapmeta file
	maxAt map[int64]int       // version -> highest attempt seen in any file name
	files []string            // every parsed state file name
	tmps  []string            // leftover temp files
	other map[string]struct{} // unrecognised names (kept, never deleted)
}

func listCatalog(fs vfs.FS, dir string) (*catalog, error) {
	names, err := fs.List(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			names = nil
		} else {
			return nil, fmt.Errorf("list state dir %s: %w", dir, err)
		}
	}
	c := &catalog{metas: map[int64][]int{}, snaps: map[versionRef]bool{}, maxAt: map[int64]int{}, other: map[string]struct{}{}}
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) {
			c.tmps = append(c.tmps, n)
			continue
		}
		v, a, suf, ok := parseFileName(n)
		if !ok {
			c.other[n] = struct{}{}
			continue
		}
		c.files = append(c.files, n)
		if cur, seen := c.maxAt[v]; !seen || a > cur {
			c.maxAt[v] = a
		}
		switch suf {
		case "meta":
			c.metas[v] = append(c.metas[v], a)
		case "snapmeta":
			c.snaps[versionRef{v, a}] = true
		}
	}
	for v := range c.metas {
		sort.Ints(c.metas[v])
	}
	return c, nil
}

// versions returns the versions with metadata, ascending.
func (c *catalog) versions() []int64 {
	vs := make([]int64, 0, len(c.metas))
	for v := range c.metas {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs
}

// latestAttempt returns the newest attempt of version v (the one that wins).
func (c *catalog) latestAttempt(v int64) (int, bool) {
	as := c.metas[v]
	if len(as) == 0 {
		return 0, false
	}
	return as[len(as)-1], true
}

// readMeta reads and verifies one metadata file.
func readMeta(fs vfs.FS, dir string, v int64, attempt int) (*versionMeta, error) {
	path := fs.PathJoin(dir, metaFileName(v, attempt))
	f, err := fs.Open(path)
	if err != nil {
		return nil, errcode.Corrupt(path, err, "open state metadata of version %d", v)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, errcode.Corrupt(path, err, "read state metadata of version %d", v)
	}
	m, err := decodeMeta(b)
	if err != nil {
		return nil, errcode.Corrupt(path, err, "decode state metadata")
	}
	if m.Version != v || m.Attempt != attempt {
		return nil, errcode.Corrupt(path, nil, "state metadata says version %d attempt %d", m.Version, m.Attempt)
	}
	return m, nil
}

// loadChain returns the metadata chain that reconstructs version v (its
// newest attempt): a snapshot, or an empty base, followed by deltas, oldest
// first. Walking back from v, the first version with a background snapshot
// (a .snapmeta in c) starts the chain, as the stand-in of its metadata
// (snapMeta.standIn): the newest snapshot at or below v. A .snap without its
// .snapmeta is not a snapshot (a crash before the record was published).
func loadChain(fs vfs.FS, dir string, c *catalog, v int64) ([]*versionMeta, error) {
	a, ok := c.latestAttempt(v)
	if !ok {
		return nil, errcode.Corrupt(dir, nil, "state version %d has no metadata file", v)
	}
	var chain []*versionMeta
	ref := versionRef{v, a}
	for {
		m, err := readMeta(fs, dir, ref.Version, ref.Attempt)
		if err != nil {
			return nil, err
		}
		chain = append(chain, m)
		if len(chain) > 1 {
			prev := chain[len(chain)-2]
			if m.Partitions != prev.Partitions || m.StoreID != prev.StoreID {
				return nil, errcode.Corrupt(fs.PathJoin(dir, metaFileName(prev.Version, prev.Attempt)), nil,
					"delta of version %d does not continue version %d (partitions or store id differ)", prev.Version, m.Version)
			}
		}
		if m.Kind == kindNameDelta && c.snaps[ref] {
			sm, err := readSnapMeta(fs, dir, m)
			if err != nil {
				return nil, err
			}
			chain[len(chain)-1] = sm.standIn(m)
			break
		}
		if m.Kind == kindNameSnapshot || m.Base == nil {
			break
		}
		ref = *m.Base
		if len(chain) > 1<<20 {
			return nil, errcode.Corrupt(dir, nil, "state delta chain of version %d does not end", v)
		}
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}
