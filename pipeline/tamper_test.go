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

// TestTamperTwoOperatorsNoticedAtStart: on a checkpoint of two stateful
// operators (a deduplication, then the aggregation: Spark's ids make the
// aggregation operator 0 and the deduplication, the first the rows reach,
// operator 1), a query shape record whose state schema of either operator
// differs from that operator's state is reported by checkpoint verify and
// refused by a start, naming both files, before anything is written; the
// restored record resumes. A start checked the first operator alone, and
// verify only the schema of a one-aggregation shape.
func TestTamperTwoOperatorsNoticedAtStart(t *testing.T) {
	dedup := func(c *Config) { c.DropDuplicates = "hash" }
	base := t.TempDir()
	if err := damageRunWith(t, vfs.Default, base, 2, dedup); err != nil {
		t.Fatal(err)
	}
	ck := func(rel string) string { return filepath.Join(base, "ck", rel) }
	shapePath := ck("shape/0")
	orig := string(readFile(t, shapePath))
	for _, row := range []struct {
		op string
		// at finds the state schema's key( to tamper with in the record.
		at func(s, sub string) int
	}{
		{"0", strings.Index}, {"1", strings.LastIndex},
	} {
		t.Run("operator_"+row.op, func(t *testing.T) {
			meta, _ := filepath.Glob(ck("state/" + row.op + "/" + strings.Repeat("0", 19) + "1.*.meta"))
			if len(meta) != 1 {
				t.Fatalf("state metadata of operator %s, version 1: %v", row.op, meta)
			}
			i := row.at(orig, ` key(`)
			if strings.Count(orig, ` key(`) != 2 || i < 0 {
				t.Fatalf("%s does not hold two state schemas:\n%s", shapePath, orig)
			}
			writeFile(t, shapePath, orig[:i]+` key(tampered int64, `+orig[i+len(` key(`):])
			defer writeFile(t, shapePath, orig)
			vr, err := Verify(context.Background(), vfs.Default, filepath.Join(base, "ck"), filepath.Join(base, "table"))
			var b strings.Builder
			vr.Print(&b)
			if err != nil || vr.Damaged == 0 || !strings.Contains(b.String(), ck("state/"+row.op)) {
				t.Fatalf("checkpoint verify does not find operator %s's (%v):\n%s", row.op, err, b.String())
			}
			before := treeHash(t, filepath.Join(base, "ck"), filepath.Join(base, "table"))
			err = damageRunWith(t, vfs.Default, base, 0, dedup)
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("start: %v, want %s", err, errcode.CheckpointCorrupt)
			}
			for _, p := range []string{shapePath, meta[0]} {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("the refusal does not name %s: %v", p, err)
				}
			}
			if after := treeHash(t, filepath.Join(base, "ck"), filepath.Join(base, "table")); after != before {
				t.Fatalf("a refused start changed files:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
	if err := damageRunWith(t, vfs.Default, base, 0, dedup); err != nil {
		t.Fatalf("restored: %v", err)
	}
}
