package demo

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/pipeline"
)

// TestStateAtScaleSmall is `bench --state-at-scale all` on a small archive
// (the seed preset's 26 million blocks are a bench, not a test): for the
// join and the deduplication, the state the backfill left is the state the
// repartition 200 -> 8 read and the state it wrote, at a restart and
// offline (`ethstream checkpoint repartition` of a copy), row for row (the
// digest of every key and value), and it is
// the state the queries must keep (a row per block on each side of the
// join, a key per block for dropDuplicates(hash) beside the count's one).
func TestStateAtScaleSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	dir := t.TempDir()
	arch := filepath.Join(dir, "arch")
	m, err := archivegen.Generate(t.Context(), archivegen.Options{Out: arch, Preset: chain.LastBlocksPreset(500), Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	src := pipeline.SourceSpec{Name: ArchiveSource, Format: "s3archive",
		URI: "file://" + filepath.ToSlash(filepath.Join(arch, filepath.FromSlash(archivegen.TablePrefix(archivegen.TableBlocks))))}
	b := &benchRun{quiet: slog.New(slog.DiscardHandler)}
	for op, want := range map[string]int64{
		// The join's state (format 3): per side a row per (key, index),
		// every block on both sides; a key of one row (each block hash)
		// has no count.
		"join":  2 * m.Rows,
		"dedup": m.Rows + 1,
	} {
		t.Run(op, func(t *testing.T) {
			r, err := runAtScale(t.Context(), io.Discard, op, filepath.Join(dir, op), src, b.runConfig)
			if err != nil {
				t.Fatal(err)
			}
			if r.Keys != want || r.KeysBefore != want || r.KeysAfter != want || r.InputRows == 0 {
				t.Fatalf("%d blocks: %d keys after the backfill, want %d; the repartition read %d and wrote %d (%d input rows)",
					m.Rows, r.Keys, want, r.KeysBefore, r.KeysAfter, r.InputRows)
			}
			if r.OfflineBefore != want || r.OfflineAfter != want {
				t.Fatalf("the offline repartition read %d keys and wrote %d, want %d", r.OfflineBefore, r.OfflineAfter, want)
			}
			// Every row kept, not only their count: the state's digest
			// at the repartitions' versions is the backfill's.
			if r.Backfilled.Rows != want || r.Online != r.Backfilled || r.Offline != r.Backfilled {
				t.Fatalf("state after the backfill %+v (want %d rows), after the repartition at a restart %+v, offline %+v",
					r.Backfilled, want, r.Online, r.Offline)
			}
			for _, tg := range atScaleTargets(r) {
				if tg.Status != TargetPass {
					t.Errorf("%s: %s (%s)", tg.Name, tg.Status, tg.Measured)
				}
			}
		})
	}
}
