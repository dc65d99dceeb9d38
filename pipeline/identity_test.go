package pipeline

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
)

// TestMovedPairResumes moves a checkpoint and its table together (mv of
// their directory, as to a new disk or a restore under another directory)
// between two runs: the query resumes by the table's identity with the same
// query id and continuous batch ids, logs the old and new location, records
// the new one, and ends with the table and state of a run that never moved.
func TestMovedPairResumes(t *testing.T) {
	refTable, refState := reference(t)
	root := t.TempDir()
	old, moved := filepath.Join(root, "old"), filepath.Join(root, "new", "place")
	cfg := s3Config(filepath.Join(old, "ck"), filepath.Join(old, "table"), filepath.Join(old, "cache"), archiveURI(t))
	cfg.MaxBatches = 1
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	before, err := checkpoint.Dir{FS: vfs.Default, Path: cfg.Checkpoint}.ReadSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(old, moved); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cfg = s3Config(filepath.Join(moved, "ck"), filepath.Join(moved, "table"), filepath.Join(moved, "cache"), archiveURI(t))
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.QueryID != before.Metadata.ID || sum.FirstBatchID != before.CommittedID+1 {
		t.Fatalf("resumed as query %s from batch %d; want query %s from batch %d", sum.QueryID, sum.FirstBatchID, before.Metadata.ID, before.CommittedID+1)
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "moved with the checkpoint") {
			line = l
		}
	}
	if !strings.Contains(line, filepath.Join(old, "table")) || !strings.Contains(line, cfg.Table) {
		t.Fatalf("no log line naming the old and new location:\n%s", logs.String())
	}
	rec, err := shape.ReadLatest(vfs.Default, cfg.Checkpoint)
	if err != nil || rec.Shape.Sink.Location != cfg.Table || rec.Shape.Sink.ID == "" {
		t.Fatalf("recorded sink %+v, %v", rec, err)
	}
	if d := diffCounts(refTable, locTableCounts(t, cfg.Table)); d != "" {
		t.Fatalf("table: %s", d)
	}
	if got := stateDump(t, cfg.Checkpoint); got != refState {
		t.Fatalf("state differs from the run that never moved:\n%s\nwant\n%s", got, refState)
	}
}

// TestAnotherTableRefused points each of two queries at the other's table
// (refused naming both Delta metadata ids), and a new checkpoint at a table
// another query writes (refused naming it, unless --table-shared); every
// refusal leaves both checkpoints and tables byte-identical.
func TestAnotherTableRefused(t *testing.T) {
	root := t.TempDir()
	uri := archiveURI(t)
	cfgs := map[string]Config{}
	for _, q := range []string{"a", "b"} {
		cfg := s3Config(filepath.Join(root, q, "ck"), filepath.Join(root, q, "table"), filepath.Join(root, q, "cache"), uri)
		cfg.MaxBatches = 1
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		cfgs[q] = cfg
	}
	ids := map[string]string{}
	for q, cfg := range cfgs {
		rec, err := shape.ReadLatest(vfs.Default, cfg.Checkpoint)
		if err != nil || rec.Shape.Sink.ID == "" {
			t.Fatalf("query %s recorded no table id: %+v %v", q, rec, err)
		}
		ids[q] = rec.Shape.Sink.ID
	}
	refuse := func(t *testing.T, cfg Config, code string, names ...string) {
		t.Helper()
		h := treeHash(t, root)
		_, err := Run(context.Background(), cfg)
		if errcode.Code(err) != code {
			t.Fatalf("err = %v, want %s", err, code)
		}
		for _, n := range names {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("%v does not name %s", err, n)
			}
		}
		if treeHash(t, root) != h {
			t.Fatal("a refused start changed a checkpoint or a table")
		}
	}
	for _, dir := range [][2]string{{"a", "b"}, {"b", "a"}} {
		cfg := cfgs[dir[0]]
		cfg.Table = cfgs[dir[1]].Table
		t.Run(dir[0]+" on "+dir[1], func(t *testing.T) {
			refuse(t, cfg, errcode.SinkTableMismatch, ids["a"], ids["b"],
				"To fix: point --table at the table this checkpoint wrote")
		}) // the Delta sink's remedy (stream.SinkAdvisor)
	}
	snapA, err := checkpoint.Dir{FS: vfs.Default, Path: cfgs["a"].Checkpoint}.ReadSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	fresh := s3Config(filepath.Join(root, "c", "ck"), cfgs["a"].Table, filepath.Join(root, "c", "cache"), uri)
	fresh.MaxBatches = 1
	t.Run("new checkpoint", func(t *testing.T) {
		refuse(t, fresh, errcode.SinkTableInUse, snapA.Metadata.ID, "To fix: point --table at a new directory, or pass --table-shared")
		if _, err := os.Stat(fresh.Checkpoint); !os.IsNotExist(err) {
			t.Fatalf("a refused first start created its checkpoint: %v", err)
		}
	})
	fresh.TableShared = true
	if _, err := Run(context.Background(), fresh); err != nil {
		t.Fatalf("--table-shared: %v", err)
	}
}
