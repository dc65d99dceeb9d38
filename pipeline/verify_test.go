package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
)

// TestVerifyFindsEachInconsistency damages one thing per row in a real
// checkpoint and table (a query stopped after two batches: offsets and
// commits 0 and 1, a file source log 0 and 1, state versions 0 and 1, table
// versions 0 to 2) and asserts that checkpoint verify reports it at the
// expected path with the expected code, while every file still parses on
// its own where the row says so.
func TestVerifyFindsEachInconsistency(t *testing.T) {
	base := t.TempDir()
	if err := damageRun(t, base, 2); err != nil {
		t.Fatal(err)
	}
	pristine := t.TempDir()
	copyTree(t, base, pristine)
	ck := func(rel string) string { return filepath.Join(base, "ck", rel) }
	cp := func(from, to string) func(t *testing.T) {
		return func(t *testing.T) {
			b, err := os.ReadFile(ck(from))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ck(to), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	rm := func(rels ...string) func(t *testing.T) {
		return func(t *testing.T) {
			for _, r := range rels {
				if err := os.Remove(ck(r)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	write := func(rel, data string) func(t *testing.T) {
		return func(t *testing.T) {
			if err := os.MkdirAll(filepath.Dir(ck(rel)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ck(rel), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendLine := func(rel, line string) func(t *testing.T) {
		return func(t *testing.T) {
			b, err := os.ReadFile(ck(rel))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ck(rel), append(b, line+"\n"...), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	const seg = "progress/00000000000000000000.jsonl"
	rows := []struct {
		name   string
		damage func(t *testing.T)
		path   string // relative to the copy's root
		code   string
	}{
		{"offsets gap (0, 1, 3)", cp("offsets/1", "offsets/3"), "ck/offsets/2", errcode.CheckpointCorrupt},
		{"commit gap (0, 1, 3)", cp("commits/1", "commits/3"), "ck/commits/2", errcode.CheckpointCorrupt},
		{"commit without its offsets", cp("commits/1", "commits/3"), "ck/commits/3", errcode.CheckpointCorrupt},
		{"planned batch never committed", rm("commits/0"), "ck/commits/0", errcode.CheckpointCorrupt},
		{"commit with another watermark", write("commits/0", "v1\n{\"nextBatchWatermarkMs\":2100}"), "ck/commits/0", errcode.CheckpointCorrupt},
		{"file source log skips an id", rm("sources/arch/0"), "ck/sources/arch", errcode.CheckpointCorrupt},
		{"file source log behind the offsets", rm("sources/arch/1"), "ck/offsets/1", errcode.CheckpointCorrupt},
		{"progress segment with a Spark listener event", appendLine(seg, `{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent","progress":{"id":"q","runId":"r","timestamp":"2024-01-01T00:00:00.000Z","batchId":0}}`),
			"ck/" + seg, engine.CodeProgressCorrupt},
		{"progress segment with a SparkListener event", appendLine(seg, `{"Event":"SparkListenerApplicationStart","App Name":"x","Timestamp":1}`), "ck/" + seg, engine.CodeProgressCorrupt},
		{"progress segment with a line that does not parse", func(t *testing.T) {
			b, err := os.ReadFile(ck(seg))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ck(seg), append([]byte("{\"id\":\n"), b...), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "ck/" + seg, engine.CodeProgressCorrupt},
		{"state versions past the commit log", rm("commits/0", "commits/1"), "ck/state/0", errcode.CheckpointCorrupt},
		{"table txn past the commit log", rm("commits/0", "commits/1"), "table/_delta_log/00000000000000000002.json", errcode.CheckpointCorrupt},
		{"shape record truncated", func(t *testing.T) {
			b, _ := os.ReadFile(ck("shape/0"))
			write("shape/0", string(b[:len(b)/2]))(t)
		}, "ck/shape/0", errcode.CheckpointCorrupt},
		{"ethrpc history damaged", write("sources/live/history.5.0xab.json", `{"version":1,"blocks":[{"number":5}]}`), "ck/sources/live/history.5.0xab.json", errcode.CheckpointCorrupt},
	}
	for _, row := range rows {
		t.Run(strings.ReplaceAll(row.name, " ", "_"), func(t *testing.T) {
			if err := os.RemoveAll(base); err != nil {
				t.Fatal(err)
			}
			copyTree(t, pristine, base)
			row.damage(t)
			vr, err := Verify(context.Background(), vfs.Default, filepath.Join(base, "ck"), filepath.Join(base, "table"))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			vr.Print(&out)
			want := filepath.Join(base, row.path)
			found := false
			for _, c := range vr.Checks {
				if c.Err != nil && c.Path == want && errcode.Code(c.Err) == row.code {
					found = true
				}
			}
			if !found || vr.Damaged == 0 || !strings.Contains(out.String(), "DAMAGED  "+want) || !strings.Contains(out.String(), row.code) {
				t.Fatalf("want %s reported at %s:\n%s", row.code, want, out.String())
			}
		})
	}
}

// openCountFS counts the opens of each path.
type openCountFS struct {
	vfs.FS
	mu    sync.Mutex
	opens map[string]int
}

func (f *openCountFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f.mu.Lock()
	f.opens[name]++
	f.mu.Unlock()
	return f.FS.Open(name, opts...)
}

// TestVerifyReadsEachStateVersionOnce: verify's check of the state records
// (verifyStateRecords) reads each committed version's metadata and carry
// once; it read the last version's twice, once for its record and once for
// its carry (a carry file of megabytes after a backfill batch).
func TestVerifyReadsEachStateVersionOnce(t *testing.T) {
	root := t.TempDir()
	if err := damageRun(t, root, 2); err != nil {
		t.Fatal(err)
	}
	fs := &openCountFS{FS: vfs.Default, opens: map[string]int{}}
	d := checkpoint.Dir{FS: fs, Path: filepath.Join(root, "ck")}
	logs, _, err := d.ReadLogs()
	if err != nil || len(logs.CommitIDs) != 2 {
		t.Fatalf("commits %v, %v; want 0 and 1", logs.CommitIDs, err)
	}
	ops, err := fs.List(d.Join(checkpoint.StateDir))
	if err != nil || len(ops) == 0 {
		t.Fatalf("state operators %v, %v", ops, err)
	}
	clear(fs.opens)
	rep := &VerifyReport{}
	for _, op := range ops {
		verifyStateRecords(d, d.Join(checkpoint.StateDir, op), 0, logs, rep)
	}
	if rep.Damaged != 0 {
		var out strings.Builder
		rep.Print(&out)
		t.Fatalf("a pristine checkpoint is damaged:\n%s", out.String())
	}
	stateOpens := 0
	for p, n := range fs.opens {
		if !strings.HasPrefix(p, d.Join(checkpoint.StateDir)) {
			continue
		}
		stateOpens += n
		if n != 1 {
			t.Errorf("%s opened %d times, want once", p, n)
		}
	}
	if stateOpens < len(logs.CommitIDs) {
		t.Fatalf("%d opens under state/ for %d committed versions: the check read nothing", stateOpens, len(logs.CommitIDs))
	}
}
