package ethnode

import (
	"context"
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
)

// TestExtend: an archive extended by k blocks has a manifest ReadManifest
// accepts, whose last block and hash are those a node started on the
// original archive serves at that height, and one file per new date in
// blocks and in every table.
func TestExtend(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m, err := archivegen.Generate(ctx, archivegen.Options{Out: dir, Preset: chain.LastBlocksPreset(20), Seed: 3, Tables: archivegen.Tables[1:]})
	if err != nil {
		t.Fatal(err)
	}
	const k = 7
	ext, err := Extend(ctx, dir, m, k)
	if err != nil {
		t.Fatal(err)
	}
	back, err := archivegen.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	orig := startTestNode(t, Options{Manifest: m, Seed: m.Seed, Manual: true, InitialBlocks: k + 1})
	if h := orig.Header(m.LastBlock + k); back.LastBlock != m.LastBlock+k || h == nil || back.LastHash != h.Hash().Hex() || back.Rows != m.Rows+k {
		t.Fatalf("extended manifest: last %d %s rows %d; the node's block %d is %v", back.LastBlock, back.LastHash, back.Rows, m.LastBlock+k, h)
	}
	if ext.LastHash != back.LastHash || len(back.Tables) != len(m.Tables) {
		t.Fatalf("returned manifest %s, written %s; tables %d, were %d", ext.LastHash, back.LastHash, len(back.Tables), len(m.Tables))
	}
	for name, tb := range back.Tables {
		if len(tb.Files) != len(back.Files) || tb.Rows < m.Tables[name].Rows {
			t.Fatalf("table %s: %d files for %d blocks files, %d rows (was %d)", name, len(tb.Files), len(back.Files), tb.Rows, m.Tables[name].Rows)
		}
	}
}
