package pipeline

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// The overlap loop covers what the single-counter loop reaches only by
// chance: a crash while the sink write and the state store's commit run at
// the same time (engine doc.go, Crash order). Each side writes in its own
// order, so a crash inside the overlap leaves some prefix of the sink's
// writes of batch N and some prefix of the state's writes of version N
// (its data file, then its metadata file). Run (j, k) stops the sink at its
// j-th write of batch N and the state at its k-th (or lets one side
// finish), each failing every later operation of its own side; once either
// side stopped, every other operation fails too, as after a crash. Then the FS loses what was not
// synced and the query restarts: the table must equal the recount, with no
// duplicate, no temp file, and no state data file without its metadata.

const (
	sideOther = iota
	sideTable
	sideState
)

// side returns which of the two overlapped writers op belongs to.
func side(path string) int {
	switch {
	case strings.HasPrefix(path, flTable+"/"):
		return sideTable
	case strings.HasPrefix(path, flCheckpoint+"/state/"):
		return sideState
	}
	return sideOther
}

// overlapWrite is one write of a side inside the overlap of a batch.
type overlapWrite struct {
	side, index int // index among the run's writes of that side
}

// overlapTrace records, in a clean run, each side's writes inside each
// batch's overlap: from the batch's offsets file to its commits file (the
// state store publishes its metadata file alongside the sink write).
type overlapTrace struct {
	mu      sync.Mutex
	n       [3]int
	batch   int // offsets files seen - 1
	inside  bool
	batches [][]overlapWrite
}

func (t *overlapTrace) String() string { return "trace" }

func (t *overlapTrace) MaybeError(op errorfs.Op) error {
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if op.Kind == errorfs.OpCreate && strings.HasPrefix(op.Path, flCheckpoint+"/offsets/.") {
		t.batches = append(t.batches, nil)
		t.batch = len(t.batches) - 1
		t.inside = true
	}
	if op.Kind == errorfs.OpCreate && strings.HasPrefix(op.Path, flCheckpoint+"/commits/.") {
		t.inside = false
	}
	s := side(op.Path)
	if t.inside && s != sideOther {
		t.batches[t.batch] = append(t.batches[t.batch], overlapWrite{s, t.n[s]})
	}
	t.n[s]++
	return nil
}

// overlapCrash stops the table side at its write stop[sideTable] and the
// state side at its write stop[sideState] (-1: never).
type overlapCrash struct {
	mu   sync.Mutex
	stop [3]int
	n    [3]int
	hit  [3]bool
}

func (c *overlapCrash) String() string {
	return fmt.Sprintf("stop table at write %d, state at write %d", c.stop[sideTable], c.stop[sideState])
}

func (c *overlapCrash) MaybeError(op errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := side(op.Path)
	if c.hit[s] || s == sideOther && (c.hit[sideTable] || c.hit[sideState]) {
		return errorfs.ErrInjected
	}
	if s == sideOther || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	if c.n[s] == c.stop[s] {
		c.hit[s] = true
		return errorfs.ErrInjected
	}
	c.n[s]++
	return nil
}

func TestFaultLoopCrashDuringOverlap(t *testing.T) {
	t.Parallel()
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	want := recount(t, archive)
	tr := &overlapTrace{}
	if err := runQuery(t, errorfs.Wrap(vfs.NewMem(), tr), t.TempDir(), time.Now); err != nil {
		t.Fatal(err)
	}
	runs := 0
	start := time.Now()
	for b, ws := range tr.batches {
		// Stop points per side inside this batch's overlap, plus -1: the
		// side runs to its end.
		stops := [3][]int{}
		for _, w := range ws {
			stops[w.side] = append(stops[w.side], w.index)
		}
		if len(stops[sideTable]) == 0 || len(stops[sideState]) == 0 {
			continue // nothing overlapped (a batch without a state write)
		}
		for _, j := range append(stops[sideTable], -1) {
			for _, k := range append(stops[sideState], -1) {
				if j < 0 && k < 0 {
					continue
				}
				runs++
				inj := &overlapCrash{}
				inj.stop[sideTable], inj.stop[sideState] = j, k
				inj.stop[sideOther] = -1
				mem := vfs.NewCrashableMem()
				if err := runQuery(t, errorfs.Wrap(mem, inj), t.TempDir(), time.Now); err == nil {
					t.Fatalf("batch %d, %s: no fault hit", b, inj)
				}
				fs := mem.CrashClone(vfs.CrashCloneCfg{})
				later := func() time.Time { return time.Now().Add(2 * time.Hour) }
				if err := runQuery(t, fs, t.TempDir(), later); err != nil {
					t.Fatalf("batch %d, %s: restart failed: %v", b, inj, err)
				}
				got, err := archiveTableCounts(fs)
				if err != nil {
					t.Fatalf("batch %d, %s: read table after restart: %v", b, inj, err)
				}
				if d := diffCounts(want, got); d != "" {
					t.Fatalf("batch %d, %s: after restart: %s", b, inj, d)
				}
				if tmps := listTemps(fs, "/"); len(tmps) > 0 {
					t.Fatalf("batch %d, %s: temp files left after the restart: %v", b, inj, tmps)
				}
				if o := orphanStateData(fs); len(o) > 0 {
					t.Fatalf("batch %d, %s: state data files without metadata after the restart: %v", b, inj, o)
				}
			}
		}
	}
	if runs < 20 {
		t.Fatalf("only %d overlapped crash points", runs)
	}
	t.Logf("%d crash points inside the overlap, in %s", runs, time.Since(start).Round(time.Millisecond))
}

// orphanStateData lists the state data files (.delta, .snap) under the
// checkpoint whose version attempt has no .meta file.
func orphanStateData(fs vfs.FS) []string {
	dir := fs.PathJoin(flCheckpoint, "state", "0")
	names, _ := fs.List(dir)
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	var out []string
	for _, n := range names {
		base, ok := strings.CutSuffix(n, ".delta")
		if !ok {
			base, ok = strings.CutSuffix(n, ".snap")
		}
		if ok && !has[base+".meta"] {
			out = append(out, fs.PathJoin(dir, n))
		}
	}
	return out
}
