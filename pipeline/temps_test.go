package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// TestDeadWriterTempsRemovedAtStart plants, in a stopped query's checkpoint
// and table, the temp files a writer killed mid-publish leaves (fresh ones:
// no age rule would remove them). While another owner holds the
// checkpoint lock, a start is refused and every temp file stays; once the
// lock is free, the next start removes them all (not after vacuum's
// retention) and the query finishes with the right table.
func TestDeadWriterTempsRemovedAtStart(t *testing.T) {
	archive, err := damageArchive()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := damageRun(t, root, 2); err != nil {
		t.Fatal(err)
	}
	const hex = ".0123456789abcdef.tmp"
	temps := []string{
		"ck/.metadata" + hex,
		"ck/offsets/.2" + hex,
		"ck/commits/.2" + hex,
		"ck/sources/" + flSource + "/.2" + hex,
		"ck/state/0/.00000000000000000002.0.delta" + hex,
		"ck/state/0/.00000000000000000002.0.meta" + hex,
		"ck/shape/.1" + hex,
		"table/_delta_log/.00000000000000000003.json" + hex,
		"table/_delta_log/.00000000000000000003.checkpoint.parquet" + hex,
		"table/.part-00000-6f1c1f3e-8a4b-4c3e-9b8e-3f0e2b7d9a10-c000.snappy.parquet" + hex,
	}
	for _, rel := range temps {
		if err := os.WriteFile(filepath.Join(root, rel), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	left := func() []string {
		var out []string
		for _, rel := range temps {
			if _, err := os.Stat(filepath.Join(root, rel)); err == nil {
				out = append(out, rel)
			}
		}
		return out
	}

	lock, err := vfs.Default.Lock(filepath.Join(root, "ck", ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, filepath.Join(root, "ck"), filepath.Join(root, "table"))
	if err := damageRun(t, root, 0); !errcode.Is(err, errcode.CheckpointLocked) {
		t.Fatalf("start while another owner holds the lock: %v, want %s", err, errcode.CheckpointLocked)
	}
	if got := left(); len(got) != len(temps) {
		t.Fatalf("a start that did not get the lock removed temp files: %d of %d left", len(got), len(temps))
	}
	if after := treeHash(t, filepath.Join(root, "ck"), filepath.Join(root, "table")); after != before {
		t.Fatalf("a refused start changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if err := lock.Close(); err != nil {
		t.Fatal(err)
	}

	if err := damageRun(t, root, 0); err != nil {
		t.Fatal(err)
	}
	if got := left(); len(got) > 0 {
		t.Fatalf("temp files of a dead writer left after a clean start: %s", strings.Join(got, ", "))
	}
	got, err := keyCounts(vfs.Default, filepath.Join(root, "table"))
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(recount(t, archive), got); d != "" {
		t.Fatal(d)
	}
}
