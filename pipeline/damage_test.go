package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// The damage table: each row damages one file of a checkpoint, its table or
// its state cache (on a copy of a query stopped after two batches of three)
// and restarts the query. A row either ends in a coded error that changed
// nothing (checkpoint and table byte-identical), after which restoring the
// file lets the query finish, or in a repair (the cache rows); either way the
// finished table equals a recount of the archive. No row may pass silently
// with wrong results, panic or hang.

// damageArchive is three days of the model chain, one file (one batch) a day.
var damageArchive = sync.OnceValues(func() (string, error) {
	dir, err := sharedTempDir("ethstream-damage-")
	if err != nil {
		return "", err
	}
	_, err = archivegen.Generate(context.Background(), archivegen.Options{Out: dir, Preset: chain.RangePreset(chain.FirstDay, 3), Seed: 2})
	return dir, err
})

// damageRun runs the query on root/ck, root/table and root/cache; max > 0
// stops after that many data batches.
func damageRun(t *testing.T, root string, max int) error {
	t.Helper()
	return damageRunFS(t, vfs.Default, root, max)
}

// damageRunFS is damageRun with the checkpoint and the table on fsys.
func damageRunFS(t *testing.T, fsys vfs.FS, root string, max int) error {
	t.Helper()
	return damageRunWith(t, fsys, root, max, nil)
}

// damageRunWith is damageRunFS with the query's configuration changed by
// change (nil: none).
func damageRunWith(t *testing.T, fsys vfs.FS, root string, max int, change func(*Config)) error {
	t.Helper()
	archive, err := damageArchive()
	if err != nil {
		t.Fatal(err)
	}
	uri := "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"
	cfg := Config{
		Checkpoint: filepath.Join(root, "ck"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "cache"),
		FS: fsys, MaxBatches: max,
		Sources: []SourceSpec{{Name: flSource, Format: "s3archive", URI: uri}},
		Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
			"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Logger:  slog.New(slog.DiscardHandler),
		Clock:   stream.SystemClock{},
	}
	if change != nil {
		change(&cfg)
	}
	q, opts, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The cache on the disk, as a state past its budget in memory keeps
	// it: the cache rows damage its files.
	opts.LocalFS = vfs.Default
	sink, err := delta.NewMergeSink(delta.SinkOptions{Path: cfg.Table, FS: fsys, Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	q.Sink = sink
	done := make(chan error, 1)
	go func() {
		_, err := engine.Run(context.Background(), q, opts)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("the query hangs")
		return nil
	}
}

// copyTree copies the regular files of src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// treeHash lists every file under the dirs with its content hash.
func treeHash(t *testing.T, dirs ...string) string {
	t.Helper()
	var lines []string
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(p)
			h := sha256.Sum256(b)
			lines = append(lines, p+" "+hex.EncodeToString(h[:8]))
			return nil
		})
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// pick returns the files under dir (relative to root) whose relative path
// matches fn, sorted.
func pick(t *testing.T, root, dir string, fn func(rel string) bool) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if fn(filepath.ToSlash(rel)) {
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

type damageRow struct {
	name string
	// files picks the victims (relative to the copy's root); the row
	// applies to the last one unless all is set.
	files func(t *testing.T, root string) []string
	all   bool
	how   string // flip, truncate, delete, or other-id (metadata)
	// code is the error code the restart must end with; "" = a repair (the
	// restart succeeds); "any" = any code, or a restart that is exact.
	code string
	// gap, if set, is a known damage that is not detected yet: the row is
	// skipped with this reason.
	gap string
}

func under(dir string, fn func(rel string) bool) func(t *testing.T, root string) []string {
	return func(t *testing.T, root string) []string { return pick(t, root, dir, fn) }
}

func suffix(s string) func(string) bool {
	return func(r string) bool { return strings.HasSuffix(r, s) }
}

func applyDamage(t *testing.T, path, how string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "delete":
		err = os.Remove(path)
	case "truncate":
		err = os.WriteFile(path, b[:len(b)/2], 0o644)
	case "flip":
		b[len(b)/2] ^= 0x20
		err = os.WriteFile(path, b, 0o644)
	case "flip-all":
		for i := len(b) / 8; i < len(b)*7/8; i += 5 {
			b[i] ^= 0x5a
		}
		err = os.WriteFile(path, b, 0o644)
	case "other-id":
		err = os.WriteFile(path, []byte(`{"id":"00000000-0000-4000-8000-000000000000"}`), 0o644)
	default:
		t.Fatalf("unknown damage %q", how)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestDamageTable(t *testing.T) {
	archive, err := damageArchive()
	if err != nil {
		t.Fatal(err)
	}
	want := recount(t, archive)
	base := t.TempDir()
	if err := damageRun(t, base, 2); err != nil {
		t.Fatal(err)
	}
	if vr, err := Verify(context.Background(), vfs.Default, filepath.Join(base, "ck"), filepath.Join(base, "table")); err != nil || vr.Damaged > 0 || len(vr.Checks) < 15 {
		var b strings.Builder
		if vr != nil {
			vr.Print(&b)
		}
		t.Fatalf("verify of the intact copy: %v\n%s", err, b.String())
	}
	pristine := t.TempDir()
	copyTree(t, base, pristine)
	stateFile := func(ext string) func(t *testing.T, root string) []string {
		return under("ck/state/0", suffix(ext))
	}
	commitJSON := under("table/_delta_log", func(r string) bool {
		return strings.HasSuffix(r, ".json") && !strings.HasSuffix(r, "_last_checkpoint")
	})
	rows := []damageRow{
		{name: "state newest delta truncated", files: stateFile(".delta"), how: "truncate", code: errcode.CheckpointCorrupt},
		{name: "state newest delta flipped", files: stateFile(".delta"), how: "flip", code: errcode.CheckpointCorrupt},
		{name: "state newest delta deleted", files: stateFile(".delta"), how: "delete", code: errcode.CheckpointCorrupt},
		// The file the chain starts from: version 0's delta on the empty
		// state (commits write deltas only; two batches are too few for a
		// background snapshot, whose damage state's own tests cover).
		{name: "state chain base flipped", files: stateFile("00000000000000000000.0.delta"), how: "flip", code: errcode.CheckpointCorrupt},
		{name: "state newest meta flipped", files: stateFile(".meta"), how: "flip", code: errcode.CheckpointCorrupt},
		{name: "state newest meta deleted", files: stateFile(".meta"), how: "delete", code: errcode.CheckpointCorrupt},
		{name: "cache sstables corrupted", files: under("cache", suffix(".sst")), all: true, how: "flip-all"},
		{name: "cache sstables deleted", files: under("cache", suffix(".sst")), all: true, how: "delete"},
		{name: "cache manifests corrupted", files: under("cache", func(r string) bool { return strings.Contains(r, "MANIFEST") }), all: true, how: "flip-all"},
		{name: "newest delta commit deleted", files: commitJSON, how: "delete", code: errcode.TableBehindCheckpoint},
		{name: "live data file deleted", files: under("table", suffix(".parquet")), how: "delete", code: delta.CodeMissingFile},
		// The issue-39 rows: a commit log that lost more than its newest
		// entry is damage, never the crash state "offsets/N without
		// commits/N" a start repairs by re-running N.
		{name: "commits all deleted", files: under("ck/commits", func(string) bool { return true }), all: true, how: "delete", code: errcode.CheckpointCorrupt},
		{name: "commits all truncated", files: under("ck/commits", func(r string) bool { return !strings.Contains(r, "/.") }), all: true, how: "truncate", code: errcode.CheckpointCorrupt},
		{name: "metadata with another query id", files: under("ck", func(r string) bool { return r == "ck/metadata" }), how: "other-id", code: errcode.CheckpointCorrupt},
	}
	// Every other file of the checkpoint and the table, truncated, flipped
	// and deleted: a coded error or an exact result.
	for _, dir := range []string{"ck/offsets", "ck/commits", "ck/sources/" + flSource, "table/_delta_log", "table"} {
		for _, how := range []string{"truncate", "flip", "delete"} {
			d := dir
			gap := ""
			if d == "ck/sources/"+flSource && how == "flip" {
				gap = "a file source log line is Spark's checksum-less JSON: a flipped byte inside a path parses, the file seems never admitted, and it is read again"
			}
			rows = append(rows, damageRow{name: d + " newest " + how, how: how, code: "any", gap: gap,
				files: under(d, func(r string) bool {
					return filepath.ToSlash(filepath.Dir(r)) == d && !strings.HasPrefix(filepath.Base(r), ".")
				})})
		}
	}
	rows = append(rows, damageRow{name: "metadata flipped", how: "flip", code: "any",
		files: under("ck", func(r string) bool { return r == "ck/metadata" })})
	for _, row := range rows {
		t.Run(strings.ReplaceAll(row.name, " ", "_"), func(t *testing.T) {
			if row.gap != "" {
				t.Skip("known gap: " + row.gap)
			}
			// Every row works at the same paths (the checkpoint records
			// where its table is), on a fresh copy of the stopped query.
			root := base
			if err := os.RemoveAll(root); err != nil {
				t.Fatal(err)
			}
			copyTree(t, pristine, root)
			victims := row.files(t, root)
			if len(victims) == 0 {
				t.Fatal("no file to damage")
			}
			if !row.all {
				victims = victims[len(victims)-1:]
			}
			orig := map[string][]byte{}
			for _, v := range victims {
				p := filepath.Join(root, v)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				orig[p] = b
				applyDamage(t, p, row.how)
			}
			before := treeHash(t, filepath.Join(root, "ck"), filepath.Join(root, "table"))
			if row.code != "" && row.code != "any" {
				// checkpoint verify names the damage too.
				vr, err := Verify(context.Background(), vfs.Default, filepath.Join(root, "ck"), filepath.Join(root, "table"))
				if err != nil || vr.Damaged == 0 {
					t.Fatalf("%v: checkpoint verify finds no damage (%v)", victims, err)
				}
			}
			err := damageRun(t, root, 0)
			switch {
			case err == nil && row.code != "" && row.code != "any":
				t.Fatalf("%v: restart succeeded, want %s", victims, row.code)
			case err != nil && row.code == "":
				t.Fatalf("%v: restart failed, want a repair: %v", victims, err)
			case err != nil:
				code := errcode.Code(err)
				if code == "" || (row.code != "any" && code != row.code) {
					t.Fatalf("%v: want %s, got %v", victims, row.code, err)
				}
				if after := treeHash(t, filepath.Join(root, "ck"), filepath.Join(root, "table")); after != before {
					t.Fatalf("%v: a refused start changed files:\nbefore:\n%s\nafter:\n%s", victims, before, after)
				}
				for p, b := range orig {
					if err := os.WriteFile(p, b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := damageRun(t, root, 0); err != nil {
					t.Fatalf("%v restored: %v", victims, err)
				}
			}
			got, err := keyCounts(vfs.Default, filepath.Join(root, "table"))
			if errcode.Is(err, delta.CodeCorruptFile) && row.code == "any" {
				// Damage inside a data file the restart did not read
				// is not visible at a start (ethstream checkpoint verify
				// reads every file); it stays refused when read, and
				// restoring the file makes the table whole.
				for p, b := range orig {
					if err := os.WriteFile(p, b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				got, err = keyCounts(vfs.Default, filepath.Join(root, "table"))
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := diffCounts(want, got); d != "" {
				t.Fatalf("%v (%v): %s", victims, err, d)
			}
		})
	}
}
