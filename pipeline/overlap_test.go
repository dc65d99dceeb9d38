package pipeline

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

// TestOverlapNeedsDedupByBlock: a query reading an ethrpc source with
// overlap=K is refused at Build (before anything is opened) unless it
// deduplicates by a block's identity: hash or number, without source (by
// which the archive's and the node's copy of a block differ).
func TestOverlapNeedsDedupByBlock(t *testing.T) {
	live := SourceSpec{Name: "eth_live", Format: "ethrpc", URI: "http://127.0.0.1:1?start_block=100&overlap=10&start_parent_hash=0x" + strings.Repeat("ab", 32)}
	for _, c := range []struct {
		dups, within string
		ok           bool
	}{
		{"", "", false},
		{"miner", "", false},
		{"hash, source", "", false},
		{"hash", "", true},
		{"", "number", true},
		{"hash, miner", "", true},
	} {
		dir := t.TempDir()
		cfg := Config{Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "table"), Sources: []SourceSpec{live},
			DropDuplicates: c.dups, DropDuplicatesWithinWatermark: c.within}
		_, _, err := Build(cfg)
		if c.ok && err != nil || !c.ok && errcode.Code(err) != errcode.InvalidArgument {
			t.Errorf("--drop-duplicates %q --drop-duplicates-within-watermark %q: %v", c.dups, c.within, err)
		}
		if !c.ok && err != nil && !strings.Contains(err.Error(), "overlap=10") {
			t.Errorf("the refusal does not name the overlap: %v", err)
		}
	}
	live.URI = strings.Replace(live.URI, "&overlap=10", "", 1)
	if _, _, err := Build(Config{Checkpoint: filepath.Join(t.TempDir(), "ck"), Table: filepath.Join(t.TempDir(), "t"), Sources: []SourceSpec{live}}); err != nil {
		t.Errorf("without overlap: %v", err)
	}
}
