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
// chance: a crash while the sink write, the state store's commit and the
// write of commits/N run at the same time (engine doc.go, Crash order).
// Each side writes in its own order, so a crash inside the overlap leaves
// some prefix of the sink's writes of batch N, some prefix of the state's
// writes of version N (its data file, then its metadata file) and some
// prefix of commits/N's (its temp file, written and fsynced alongside the
// two, then, once both returned, its link and directory fsync). Run
// (j, k, c) stops the sink at its j-th write of batch N, the state at its
// k-th and commits/N at its c-th (or lets a side finish), each failing
// every later operation of its own side; once any side stopped, every other
// operation fails too, as after a crash. Then the FS loses what was not
// synced and the query restarts: the table must equal the recount, with no
// duplicate, no temp file, and no state data file without its metadata.

const (
	sideOther = iota
	sideTable
	sideState
	sideCommit
	nSides
)

// side returns which of the three overlapped writers op belongs to.
func side(path string) int {
	switch {
	case strings.HasPrefix(path, flTable+"/"):
		return sideTable
	case strings.HasPrefix(path, flCheckpoint+"/state/"):
		return sideState
	case strings.HasPrefix(path, flCheckpoint+"/commits/"):
		return sideCommit
	}
	return sideOther
}

// overlapWrite is one write of a side inside the overlap of a batch.
type overlapWrite struct {
	side, index int // index among the run's writes of that side
	// linked: a write of commits/N at or after its link (once the sink and
	// the state returned).
	linked bool
}

// overlapTrace records, in a clean run, each side's writes inside each
// batch's overlap: from the batch's offsets file to the directory fsync
// that publishes its commits file (the state store publishes its metadata
// file alongside the sink write, and commits/N is written alongside both).
// It also checks Spark's order on every batch: commits/N is linked only
// after every write of the sink's batch N and of state version N.
type overlapTrace struct {
	mu      sync.Mutex
	n       [nSides]int
	batch   int // offsets files seen - 1
	inside  bool
	linked  bool // the batch's commits/N is linked: its dir fsync closes the window
	batches [][]overlapWrite
	// late are the sink and state writes of a batch after its commits/N
	// was linked: Spark's order broken.
	late []string
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
	s := side(op.Path)
	// After commits/N's link, nothing of state version N may be written,
	// nor any Delta commit published (the sink's background work after
	// its batch writes checkpoints, by rename).
	stateN := s == sideState && strings.Contains(op.Path, fmt.Sprintf("%020d.", t.batch))
	deltaCommit := op.Kind == errorfs.OpLink && strings.HasPrefix(op.Path, flTable+"/_delta_log/")
	if t.inside && t.linked && (stateN || deltaCommit) {
		t.late = append(t.late, fmt.Sprintf("batch %d: op %d on %s after commits/%d was linked", t.batch, op.Kind, op.Path, t.batch))
	}
	if op.Kind == errorfs.OpLink && strings.HasPrefix(op.Path, flCheckpoint+"/commits/.") {
		t.linked = true
	}
	if t.inside && s != sideOther {
		t.batches[t.batch] = append(t.batches[t.batch], overlapWrite{s, t.n[s], s == sideCommit && t.linked})
	}
	t.n[s]++
	if t.linked && op.Kind == errorfs.OpFileSync && op.Path == flCheckpoint+"/commits" {
		t.inside, t.linked = false, false
	}
	return nil
}

// overlapCrash stops the table side at its write stop[sideTable], the
// state side at its write stop[sideState] and the commits side at its write
// stop[sideCommit] (-1: never).
type overlapCrash struct {
	mu   sync.Mutex
	stop [nSides]int
	n    [nSides]int
	hit  [nSides]bool
}

func (c *overlapCrash) String() string {
	return fmt.Sprintf("stop table at write %d, state at write %d, commits at write %d", c.stop[sideTable], c.stop[sideState], c.stop[sideCommit])
}

func (c *overlapCrash) MaybeError(op errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := side(op.Path)
	if c.hit[s] || s == sideOther && (c.hit[sideTable] || c.hit[sideState] || c.hit[sideCommit]) {
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
	if len(tr.late) > 0 {
		t.Fatalf("commits/N linked before the sink's and the state's writes ended: %v", tr.late)
	}
	runs, commitRuns := 0, 0
	start := time.Now()
	for b, ws := range tr.batches {
		// Stop points per side inside this batch's overlap, plus -1: the
		// side runs to its end.
		stops := [nSides][]int{}
		for _, w := range ws {
			stops[w.side] = append(stops[w.side], w.index)
		}
		if len(stops[sideTable]) == 0 || len(stops[sideState]) == 0 || len(stops[sideCommit]) == 0 {
			continue // nothing overlapped (a batch without a state write)
		}
		for _, st := range overlapStops(ws, stops) {
			runs++
			if st[sideCommit] >= 0 {
				commitRuns++
			}
			inj := &overlapCrash{stop: st}
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
	// Guard against vacuity: both overlaps are reached, commits/N's writes
	// among them.
	if runs < 20 || commitRuns < 10 {
		t.Fatalf("only %d overlapped crash points, %d of them in commits/N's writes", runs, commitRuns)
	}
	t.Logf("%d crash points inside the overlap (%d in commits/N's writes), in %s", runs, commitRuns, time.Since(start).Round(time.Millisecond))
}

// overlapStops are the stop points of one batch's runs (sideOther never
// stops), from the batch's writes ws in the clean run's order: every pair
// of a sink write and a state write with commits/N let run; every write of
// commits/N alone; and each commits/N write made before its link (its temp
// file's, made alongside the sink and the state) crossed with every sink
// and state write that followed it in the clean run (the third side let
// run). Crossing it with an earlier write would repeat that write's run:
// the side that reaches its stop first crashes the rest.
func overlapStops(ws []overlapWrite, stops [nSides][]int) [][nSides]int {
	var out [][nSides]int
	add := func(j, k, c int) {
		if j >= 0 || k >= 0 || c >= 0 {
			out = append(out, [nSides]int{sideOther: -1, sideTable: j, sideState: k, sideCommit: c})
		}
	}
	for _, j := range append(stops[sideTable], -1) {
		for _, k := range append(stops[sideState], -1) {
			add(j, k, -1)
		}
	}
	for i, w := range ws {
		if w.side != sideCommit {
			continue
		}
		add(-1, -1, w.index)
		if w.linked {
			continue
		}
		for _, l := range ws[i+1:] {
			switch l.side {
			case sideTable:
				add(l.index, -1, w.index)
			case sideState:
				add(-1, l.index, w.index)
			}
		}
	}
	return out
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

// commitsAlongside holds each batch's state metadata publish (its link)
// until commits/N's temp file was fsynced: the engine writes commits/N
// alongside the sink and the state (engine doc.go, Crash order), so the
// fsync comes while the state waits. An engine that writes commits/N only
// after the state's commit never fsyncs it while the link waits: the wait
// times out and the link fails.
type commitsAlongside struct {
	mu      sync.Mutex
	synced  chan struct{} // closed at the batch's commits/N temp fsync
	closed  bool
	batches int
	timeout time.Duration
	missed  []string
}

func (c *commitsAlongside) String() string { return "commits alongside" }

func (c *commitsAlongside) MaybeError(op errorfs.Op) error {
	c.mu.Lock()
	if op.Kind == errorfs.OpCreate && strings.HasPrefix(op.Path, flCheckpoint+"/offsets/.") {
		c.synced, c.closed = make(chan struct{}), false
	}
	synced := c.synced
	if op.Kind == errorfs.OpFileSync && strings.HasPrefix(op.Path, flCheckpoint+"/commits/.") && synced != nil && !c.closed {
		close(synced)
		c.closed = true
	}
	c.mu.Unlock()
	if op.Kind != errorfs.OpLink || !strings.HasPrefix(op.Path, flCheckpoint+"/state/") || !strings.Contains(op.Path, ".meta.") || synced == nil {
		return nil
	}
	select {
	case <-synced:
		c.mu.Lock()
		c.batches++
		c.mu.Unlock()
		return nil
	case <-time.After(c.timeout):
		c.mu.Lock()
		c.missed = append(c.missed, op.Path)
		c.mu.Unlock()
		return errorfs.ErrInjected
	}
}

// TestCommitWrittenAlongsideState: commits/N's temp file is written and
// fsynced while the state's metadata file of version N waits to be
// published, in every batch; and the loop above proves the order that
// publishes it after them.
func TestCommitWrittenAlongsideState(t *testing.T) {
	t.Parallel()
	inj := &commitsAlongside{timeout: 20 * time.Second}
	err := runQuery(t, errorfs.Wrap(vfs.NewMem(), inj), t.TempDir(), time.Now)
	if len(inj.missed) > 0 {
		t.Fatalf("commits/N was not written while the state's metadata waited: %v (run: %v)", inj.missed, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if inj.batches < 2 {
		t.Fatalf("only %d batches published state metadata", inj.batches)
	}
}
