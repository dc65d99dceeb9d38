package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// The fault loop runs the reference query over the real path: a file://
// archive written by package chain/archivegen -> the s3archive source -> the windowed
// count (agg) -> the state store -> the Delta MERGE sink, with the
// checkpoint and the table in one in-memory FS and the archive read from
// the disk through the same injector. Run i fails the i-th file operation
// (errorfs; the archive's listing, stats, opens and reads count too), or
// crashes at the i-th write (every later operation fails, archive reads
// included, and the FS loses what was not synced, or a random half of it,
// vfs.CrashClone), for every i;
// then the query restarts on what is left. After the restart: the run
// succeeded, the table equals a recount of every archived block, no row is
// duplicated, no temp file is left anywhere, and no state data file lacks
// its metadata (what an interrupted or prepared commit leaves is collected).
// faultoverlap_test.go adds the crashes inside the sink / state overlap.

const (
	flCheckpoint = "/ck"
	flTable      = "/table"
	flSource     = "arch"
)

// faultArchive is the archive every run reads: two days of the model chain
// from genesis (one file, and so one batch, per day), written once.
var faultArchive = sync.OnceValues(func() (string, error) {
	dir, err := sharedTempDir("ethstream-faultloop-")
	if err != nil {
		return "", err
	}
	_, err = archivegen.Generate(context.Background(), archivegen.Options{Out: dir, Preset: chain.RangePreset(chain.FirstDay, 2), Seed: 1})
	return dir, err
})

// sharedDirs are the directories of the package's once-made archives
// (faultArchive, damageArchive): shared by tests, so no test's cleanup can
// remove them; TestMain does, after the last test.
var sharedDirs struct {
	sync.Mutex
	list []string
}

func sharedTempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err == nil {
		sharedDirs.Lock()
		sharedDirs.list = append(sharedDirs.list, dir)
		sharedDirs.Unlock()
	}
	return dir, err
}

func TestMain(m *testing.M) {
	code := m.Run()
	sharedDirs.Lock()
	for _, dir := range sharedDirs.list {
		os.RemoveAll(dir)
	}
	sharedDirs.Unlock()
	os.Exit(code)
}

type windowKey struct {
	ws            int64 // window start, µs
	source, miner string
}

// recount counts the archive's blocks per (5-minute window, source, miner)
// straight from its Parquet files: the oracle.
func recount(t *testing.T, archive string) map[windowKey]int64 {
	t.Helper()
	type blockRow struct {
		Timestamp int64  `parquet:"timestamp"`
		Miner     string `parquet:"miner"`
	}
	want := map[windowKey]int64{}
	archiveRows(t, archive, func(b blockRow) {
		ws := b.Timestamp - b.Timestamp%WindowSize.Microseconds()
		want[windowKey{ws, flSource, b.Miner}]++
	})
	return want
}

// archiveRows calls fn with every row of every Parquet file under archive,
// read into T (its parquet tags name the columns): the oracles' reader,
// which shares no code with the source under test.
func archiveRows[T any](t *testing.T, archive string, fn func(T)) {
	t.Helper()
	err := filepath.WalkDir(archive, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		r := parquet.NewGenericReader[T](f)
		defer r.Close()
		buf := make([]T, 1024)
		for {
			n, err := r.Read(buf)
			for _, b := range buf[:n] {
				fn(b)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// archiveTableCounts reads the Delta table: count per key, failing on a duplicate key.
func archiveTableCounts(fs vfs.FS) (map[windowKey]int64, error) {
	return keyCounts(fs, flTable)
}

// keyCounts reads the Delta table at path: count per key, failing on a
// duplicate key.
func keyCounts(fs vfs.FS, path string) (map[windowKey]int64, error) {
	ctx := context.Background()
	tbl, err := delta.OpenFS(ctx, fs, path)
	if err != nil {
		return nil, err
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		return nil, err
	}
	got := map[windowKey]int64{}
	err = snap.Rows(ctx, func(r map[string]any) error {
		w := r["window"].(map[string]any)
		k := windowKey{w["start"].(time.Time).UnixMicro(), r["source"].(string), r["miner"].(string)}
		if _, dup := got[k]; dup {
			return fmt.Errorf("duplicate row %v", k)
		}
		got[k] = r["count"].(int64)
		return nil
	})
	return got, err
}

func diffCounts(want, got map[windowKey]int64) string {
	for k, w := range want {
		if got[k] != w {
			return fmt.Sprintf("%v: table has %d, recount %d (table %d keys, recount %d)", k, got[k], w, len(got), len(want))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("%v: table has %d, not in the archive", k, g)
		}
	}
	return ""
}

// runQuery runs the reference query to completion (available-now) on fs.
// sinkClock is the Delta sink's clock: a restart passes one past the sink's
// temp grace period, as a restart an hour later would see it.
func runQuery(t *testing.T, fs vfs.FS, localDir string, sinkClock func() time.Time) error {
	return runQueryArchiveFS(t, fs, nil, localDir, sinkClock)
}

// runQueryArchiveFS is runQuery reading the archive through archiveFS
// (nil: the disk).
func runQueryArchiveFS(t *testing.T, fs, archiveFS vfs.FS, localDir string, sinkClock func() time.Time) error {
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	uri := "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"
	cfg := Config{
		Checkpoint: flCheckpoint, Table: flTable, LocalDir: localDir, FS: fs, ArchiveFS: archiveFS,
		Sources: []SourceSpec{{Name: flSource, Format: "s3archive", URI: uri}},
		Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
			"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Logger:  slog.New(slog.DiscardHandler),
		Clock:   stream.SystemClock{},
	}
	q, opts, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := delta.NewMergeSink(delta.SinkOptions{Path: flTable, FS: fs, Logger: cfg.Logger, Clock: sinkClock})
	if err != nil {
		t.Fatal(err)
	}
	q.Sink = sink
	_, err = engine.Run(context.Background(), q, opts)
	return err
}

// faultInjector fails operation i (counting all operations, or only writes);
// with crash set, every operation after it fails too. hitPath is the path
// of the operation it failed.
type faultInjector struct {
	mu         sync.Mutex
	i, n       int
	writesOnly bool
	crash      bool
	hit        bool
	hitPath    string
}

func (f *faultInjector) String() string { return fmt.Sprintf("fail op %d", f.i) }

func (f *faultInjector) MaybeError(op errorfs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hit && f.crash {
		return errorfs.ErrInjected
	}
	if f.writesOnly && op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	f.n++
	if f.n-1 == f.i {
		f.hit, f.hitPath = true, op.Path
		return errorfs.ErrInjected
	}
	return nil
}

// listTemps returns every temp file under dir of fs.
func listTemps(fs vfs.FS, dir string) []string {
	var out []string
	names, _ := fs.List(dir)
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		if strings.HasSuffix(n, ".tmp") {
			out = append(out, p)
		}
		if st, err := fs.Stat(p); err == nil && st.IsDir() {
			out = append(out, listTemps(fs, p)...)
		}
	}
	return out
}

// faultMode is how run i fails.
type faultMode struct {
	name     string
	crash    bool // crash at write i (else: fail operation i, the process lives)
	unsynced int  // with crash: percent of unsynced data the crash keeps
}

var faultModes = []faultMode{{name: "fail-op"}, {name: "crash-at-write", crash: true}, {name: "crash-keeps-half-unsynced", crash: true, unsynced: 50}}

// faultRun is one run of the loop; it reports whether operation i existed
// and whether it was an operation on the archive.
func faultRun(t *testing.T, want map[windowKey]int64, i int, mode faultMode) (existed, onArchive bool) {
	crash := mode.crash
	mem := vfs.NewCrashableMem()
	inj := &faultInjector{i: i, writesOnly: crash, crash: crash}
	local := t.TempDir()
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	err = runQueryArchiveFS(t, errorfs.Wrap(mem, inj), errorfs.Wrap(vfs.Default, inj), local, time.Now)
	if !inj.hit {
		if err != nil {
			t.Fatalf("op %d: no fault injected, run failed: %v", i, err)
		}
		return false, false
	}
	onArchive = strings.HasPrefix(inj.hitPath, archive)
	if onArchive && err == nil {
		// Every archive operation feeds the batch: a failed one must
		// fail the run, never yield a batch without its rows.
		t.Fatalf("op %d (%s): an archive operation failed and the run succeeded", i, inj.hitPath)
	}
	fs := vfs.FS(mem)
	if crash {
		cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: mode.unsynced}
		if mode.unsynced > 0 {
			cfg.RNG = rand.New(rand.NewPCG(uint64(i), 1))
		}
		fs = mem.CrashClone(cfg)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	if err := runQuery(t, fs, local, later); err != nil {
		t.Fatalf("op %d (first run: %v): restart failed: %v", i, err, err)
	}
	got, err := archiveTableCounts(fs)
	if err != nil {
		t.Fatalf("op %d: read table after restart: %v", i, err)
	}
	if d := diffCounts(want, got); d != "" {
		t.Fatalf("op %d: after restart: %s", i, d)
	}
	if tmps := listTemps(fs, "/"); len(tmps) > 0 {
		t.Fatalf("op %d: temp files left after the restart: %v", i, tmps)
	}
	if o := orphanStateData(fs); len(o) > 0 {
		t.Fatalf("op %d: state data files without metadata after the restart: %v", i, o)
	}
	return true, onArchive
}

func TestFaultLoopRealPath(t *testing.T) {
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	want := recount(t, archive)
	if len(want) == 0 {
		t.Fatal("empty recount")
	}
	// The clean run is the reference: it must give the recount too.
	mem := vfs.NewMem()
	if err := runQuery(t, mem, t.TempDir(), time.Now); err != nil {
		t.Fatal(err)
	}
	got, err := archiveTableCounts(mem)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(want, got); d != "" {
		t.Fatalf("clean run: %s", d)
	}
	for _, mode := range faultModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			i, archiveOps := 0, 0
			for ; ; i++ {
				existed, onArchive := faultRun(t, want, i, mode)
				if !existed {
					break
				}
				if onArchive {
					archiveOps++
				}
			}
			if i < 20 {
				t.Fatalf("only %d operations", i)
			}
			if !mode.crash && archiveOps < 4 {
				// The archive's listing, stats, opens and reads of two files.
				t.Fatalf("only %d of %d failed operations were archive reads: the loop does not reach them", archiveOps, i)
			}
			t.Logf("%s: %d operations (%d on the archive), each failed in turn, in %s", mode.name, i, archiveOps, time.Since(start).Round(time.Millisecond))
		})
	}
}
