package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/storage/s3test"
	"github.com/ethstream/ethstream/stream"
)

// The child process of TestResumeOnAnotherMachine: "machine A", killed by
// the parent. Its query is described by the environment.
const (
	envChild      = "ETHSTREAM_TEST_S3_CHILD"
	envChildCkpt  = "ETHSTREAM_TEST_S3_CHILD_CHECKPOINT"
	envChildTable = "ETHSTREAM_TEST_S3_CHILD_TABLE"
	envChildLocal = "ETHSTREAM_TEST_S3_CHILD_LOCAL"
	envChildSrc   = "ETHSTREAM_TEST_S3_CHILD_SOURCE"
)

func init() {
	if os.Getenv(envChild) == "" {
		return
	}
	// Runs before TestMain: a live query that never stops on its own.
	cfg := s3Config(os.Getenv(envChildCkpt), os.Getenv(envChildTable), os.Getenv(envChildLocal), os.Getenv(envChildSrc))
	cfg.Trigger = engine.Trigger{Kind: engine.ProcessingTime, Interval: 0}
	_, err := Run(context.Background(), cfg)
	fmt.Fprintln(os.Stderr, "child stopped:", err)
	os.Exit(3)
}

func s3Config(ckpt, table, local, uri string) Config {
	return Config{
		Checkpoint: ckpt, Table: table, LocalDir: local,
		Sources: []SourceSpec{{Name: flSource, Format: "s3archive", URI: uri}},
		Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
			"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Logger:  slog.New(slog.DiscardHandler),
		Clock:   stream.SystemClock{},
	}
}

func archiveURI(t *testing.T) string {
	t.Helper()
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	return "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"
}

// tableCounts reads the table at location loc (any store).
func locTableCounts(t *testing.T, loc string) map[windowKey]int64 {
	t.Helper()
	cfg := Config{Checkpoint: t.TempDir(), Table: loc}
	_, table, fs, err := Locations(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tbl, err := delta.OpenFS(ctx, fs, table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
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
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// stateDump is the CSV dump of the checkpoint's state at loc.
func stateDump(t *testing.T, loc string) string {
	t.Helper()
	ckpt, _, fs, err := Locations(Config{Checkpoint: loc, Table: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := state.Dump(context.Background(), state.DumpOptions{FS: fs, Checkpoint: ckpt, Batch: -1}, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// reference runs the query with everything on the local disk.
func reference(t *testing.T) (map[windowKey]int64, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := s3Config(filepath.Join(dir, "ck"), filepath.Join(dir, "table"), filepath.Join(dir, "cache"), archiveURI(t))
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return locTableCounts(t, cfg.Table), stateDump(t, cfg.Checkpoint)
}

// TestStorageMixes runs the query with the checkpoint and the table on S3,
// in every mix with the local disk: the table and the state equal the
// all-local run's, and the recount.
func TestStorageMixes(t *testing.T) {
	want := recount(t, mustArchive(t))
	refTable, refState := reference(t)
	if d := diffCounts(want, refTable); d != "" {
		t.Fatalf("local run: %s", d)
	}
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		for _, mix := range []struct{ name, ckpt, table string }{
			{"both-s3", s.Location("both/checkpoint"), s.Location("both/table")},
			{"s3-checkpoint", s.Location("ck-only/checkpoint"), filepath.Join(t.TempDir(), "table")},
			{"s3-table", filepath.Join(t.TempDir(), "ck"), s.Location("table-only/table")},
		} {
			t.Run(mix.name, func(t *testing.T) {
				cfg := s3Config(mix.ckpt, mix.table, t.TempDir(), archiveURI(t))
				if _, err := Run(context.Background(), cfg); err != nil {
					t.Fatal(err)
				}
				if d := diffCounts(refTable, locTableCounts(t, mix.table)); d != "" {
					t.Fatalf("table: %s", d)
				}
				if got := stateDump(t, mix.ckpt); got != refState {
					t.Fatalf("state differs from the local run's:\n%s\nwant\n%s", got, refState)
				}
				// The progress log is in the checkpoint's store, one event a batch.
				ckpt, _, fs, err := Locations(Config{Checkpoint: mix.ckpt, Table: mix.table})
				if err != nil {
					t.Fatal(err)
				}
				events, err := engine.ReadProgress(fs, ckpt)
				if err != nil || len(events) == 0 {
					t.Fatalf("progress log of %s: %d events, %v", mix.ckpt, len(events), err)
				}
			})
		}
		// Nothing of the S3 runs landed on the local disk under a mangled name.
		if _, err := os.Stat("s3:"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a local s3: directory exists: %v", err)
		}
	})
}

// runCommitted starts a live query (a processing-time trigger, so it never
// stops by itself) with its checkpoint and table under prefix on s, and
// returns once it committed batch 0, with its cancel and its result.
func runCommitted(t *testing.T, s s3test.Server, prefix string) (context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := s3Config(s.Location(prefix+"/checkpoint"), s.Location(prefix+"/table"), t.TempDir(), archiveURI(t))
	cfg.Trigger = engine.Trigger{Kind: engine.ProcessingTime, Interval: 10 * time.Millisecond}
	done := make(chan error, 1)
	go func() { _, err := Run(ctx, cfg); done <- err }()
	deadline := time.Now().Add(60 * time.Second)
	for !slices.Contains(s.Keys(t, prefix+"/checkpoint/commits/"), prefix+"/checkpoint/commits/0") {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the query under %s committed nothing in 60s", prefix)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cancel, done
}

func mustArchive(t *testing.T) string {
	t.Helper()
	a, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestResumeOnAnotherMachine runs the query as its own process on machine
// A (cache dir A), kills it (SIGKILL) once a batch is in flight, then
// resumes on machine B (an empty cache dir) from S3 alone: B is refused
// while A's lease lives, then takes over once it expired and finishes with
// the same table and state as an uninterrupted local run.
func TestResumeOnAnotherMachine(t *testing.T) {
	refTable, refState := reference(t)
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		ckpt := s.Location("q1/checkpoint") + "&leaseTTL=2s"
		table := s.Location("q1/table")
		cacheA, cacheB := t.TempDir(), t.TempDir()

		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), envChild+"=1", envChildCkpt+"="+ckpt, envChildTable+"="+table,
			envChildLocal+"="+cacheA, envChildSrc+"="+archiveURI(t))
		var stderr bytes.Buffer
		child.Stderr = &stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill A once batch 1 is planned (offsets/1 published).
		deadline := time.Now().Add(60 * time.Second)
		for !slices.Contains(s.Keys(t, "q1/checkpoint/offsets/"), "q1/checkpoint/offsets/1") {
			if time.Now().After(deadline) {
				child.Process.Kill()
				child.Wait()
				t.Fatalf("machine A planned no second batch in 60s; stderr:\n%s", stderr.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		child.Wait()

		cfg := s3Config(ckpt, table, cacheB, archiveURI(t))
		_, err := Run(context.Background(), cfg)
		if !errcode.Is(err, errcode.CheckpointLocked) {
			t.Fatalf("resume while A's lease lives = %v, want CHECKPOINT_LOCKED", err)
		}
		time.Sleep(2500 * time.Millisecond) // A's lease expires
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatalf("resume on machine B: %v", err)
		}
		if d := diffCounts(refTable, locTableCounts(t, table)); d != "" {
			t.Fatalf("table after the resume: %s", d)
		}
		if got := stateDump(t, ckpt); got != refState {
			t.Fatalf("state after the resume differs from the local run's:\n%s\nwant\n%s", got, refState)
		}
		// The aggregation's small state cache lives in memory (agg's
		// memCacheBytes): no machine left a file for B to read, so B's
		// state came from S3 alone.
		for _, dir := range []string{cacheA, cacheB} {
			_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					t.Errorf("a state cache file on disk: %s", p)
				}
				return err
			})
		}
	})
}

// TestSecondQueryOnS3CheckpointIsLocked: while a query runs on an S3
// checkpoint, a second start on it is CHECKPOINT_LOCKED;
// once the first stops cleanly (its lease released) the second runs at once.
func TestSecondQueryOnS3CheckpointIsLocked(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		ckpt, table := s.Location("q2/checkpoint"), s.Location("q2/table")
		cancel, done := runCommitted(t, s, "q2")
		before := s.Keys(t, "q2/checkpoint/")
		second := s3Config(ckpt, table, t.TempDir(), archiveURI(t))
		if _, err := Run(context.Background(), second); !errcode.Is(err, errcode.CheckpointLocked) {
			t.Fatalf("second query = %v, want CHECKPOINT_LOCKED", err)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("first query: %v", err)
		}
		if after := s.Keys(t, "q2/checkpoint/"); len(after) < len(before) {
			t.Fatalf("objects vanished: %d -> %d", len(before), len(after))
		}
		if _, err := Run(context.Background(), second); err != nil {
			t.Fatalf("second query after the first stopped: %v", err)
		}
		if d := diffCounts(recount(t, mustArchive(t)), locTableCounts(t, table)); d != "" {
			t.Fatalf("table: %s", d)
		}
	})
}
