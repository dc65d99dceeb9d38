package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// TestTamperNoticedAtStart replaces files of a stopped query (two batches
// of three committed) with valid files that disagree with another file
// recording the same fact. Each start is refused with CHECKPOINT_CORRUPT
// naming both files, before writing anything (checkpoint and table
// byte-identical); checkpoint verify reports it too; restoring the file lets
// the query finish with the right table. The first row is the seen case: a
// commits/N with another nextBatchWatermarkMs was accepted, the watermark
// jumped and keys were lost.
func TestTamperNoticedAtStart(t *testing.T) {
	archive, err := damageArchive()
	if err != nil {
		t.Fatal(err)
	}
	want := recount(t, archive)
	base := t.TempDir()
	if err := damageRun(t, base, 2); err != nil {
		t.Fatal(err)
	}
	pristine := t.TempDir()
	copyTree(t, base, pristine)
	ck := func(rel string) string { return filepath.Join(base, "ck", rel) }
	stateMeta := func(v string) string {
		m, _ := filepath.Glob(ck("state/0/" + strings.Repeat("0", 20-len(v)) + v + ".*.meta"))
		if len(m) != 1 {
			t.Fatalf("state metadata of version %s: %v", v, m)
		}
		return m[0]
	}
	rows := []struct {
		name string
		// damage changes files (commits/0 and 1, shape/0 or the source
		// log's id 1, which are restored afterwards) and returns the paths
		// the refusal must name.
		damage func(t *testing.T) (named []string)
	}{
		{"last commit with another watermark", func(t *testing.T) []string {
			writeFile(t, ck("commits/1"), "v1\n{\"nextBatchWatermarkMs\":2100}")
			return []string{ck("commits/1"), stateMeta("1")}
		}},
		{"commit before a planned batch with another watermark", func(t *testing.T) []string {
			// commits/1 missing: batch 1 is pending (a crash after its state
			// commit), and commits/0 says another watermark than offsets/1.
			if err := os.Remove(ck("commits/1")); err != nil {
				t.Fatal(err)
			}
			writeFile(t, ck("commits/0"), "v1\n{\"nextBatchWatermarkMs\":2100}")
			return []string{ck("commits/0"), ck("offsets/1")}
		}},
		{"file source log behind the offsets", func(t *testing.T) []string {
			p := ck("sources/" + flSource + "/1")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return []string{ck("offsets/1"), ck("sources/" + flSource)}
		}},
		{"shape with another state schema", func(t *testing.T) []string {
			p := ck("shape/0")
			b := readFile(t, p)
			s := strings.Replace(string(b), ` key(`, ` key(tampered int64, `, 1)
			if s == string(b) {
				t.Fatalf("no state schema in %s:\n%s", p, b)
			}
			writeFile(t, p, s)
			return []string{p, stateMeta("1")}
		}},
	}
	for _, row := range rows {
		t.Run(strings.ReplaceAll(row.name, " ", "_"), func(t *testing.T) {
			if err := os.RemoveAll(base); err != nil {
				t.Fatal(err)
			}
			copyTree(t, pristine, base)
			orig := map[string][]byte{}
			for _, p := range []string{ck("commits/0"), ck("commits/1"), ck("shape/0"), ck("sources/" + flSource + "/1")} {
				orig[p] = readFile(t, p)
			}
			named := row.damage(t)
			before := treeHash(t, filepath.Join(base, "ck"), filepath.Join(base, "table"))
			vr, err := Verify(context.Background(), vfs.Default, filepath.Join(base, "ck"), filepath.Join(base, "table"))
			if err != nil || vr.Damaged == 0 {
				var b strings.Builder
				vr.Print(&b)
				t.Fatalf("checkpoint verify finds nothing (%v):\n%s", err, b.String())
			}
			err = damageRun(t, base, 0)
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("start: %v, want %s", err, errcode.CheckpointCorrupt)
			}
			for _, p := range named {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("the refusal does not name %s: %v", p, err)
				}
			}
			if after := treeHash(t, filepath.Join(base, "ck"), filepath.Join(base, "table")); after != before {
				t.Fatalf("a refused start changed files:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			for p, b := range orig {
				writeFile(t, p, string(b))
			}
			if err := damageRun(t, base, 0); err != nil {
				t.Fatalf("restored: %v", err)
			}
			got, err := keyCounts(vfs.Default, filepath.Join(base, "table"))
			if err != nil {
				t.Fatal(err)
			}
			if d := diffCounts(want, got); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
