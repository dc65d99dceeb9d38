package ethrpc

import (
	"context"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// TestOverlapSeam: overlap=10 with start_block = b+11 and the hash of
// block b+10 as start_parent_hash reads from block b+1, and checks the
// seam in the third batch of 5 blocks, the one holding start_block; a
// wrong hash is SEAM_MISMATCH there, after two batches that could not
// check it (the first block's parent is not the seam). Without
// start_parent_hash, or with start_block <= overlap, New refuses.
func TestOverlapSeam(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 30, ethnode.Faults{})
	b := m.LastBlock
	seamHash := strings.ToLower(n.Header(b + 10).Hash().Hex())
	uri := n.URL() + "?maxBlocksPerTrigger=5&confirmations=0&overlap=10&start_block=" + itoa(b+11) + "&start_parent_hash="
	o, err := ParseURI(uri + seamHash)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := openSource(t, o, nil)
	if s.Overlap() != 10 {
		t.Fatalf("Overlap() = %d", s.Overlap())
	}
	var r rows
	if end, _ := drive(t, s, nil, 10, &r); mustOffset(t, end).Block != b+30 || len(r.number) != 30 || r.number[0] != int64(b+1) {
		t.Fatalf("read %d blocks from %v to %s, want %d..%d", len(r.number), r.number[:1], end, b+1, b+30)
	}

	o.StartParentHash = "0x" + strings.Repeat("0", 64)
	s2, _ := openSource(t, o, nil)
	ctx := context.Background()
	var start stream.Offset
	for batch := 0; ; batch++ {
		end, err := s2.LatestOffset(ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		var r2 rows
		err = s2.ReadBatch(ctx, start, end, r2.emit)
		if batch < 2 && err != nil || batch == 2 && (!errcode.Is(err, CodeSeamMismatch) || len(r2.number) != 0) {
			t.Fatalf("batch %d: %v, %d rows; want SEAM_MISMATCH in batch 2 only, nothing emitted", batch, err, len(r2.number))
		}
		if batch == 2 {
			break
		}
		start = end
	}

	for _, bad := range []string{
		n.URL() + "?overlap=10&start_block=" + itoa(b+11),                    // no start_parent_hash
		n.URL() + "?overlap=10&start_block=10&start_parent_hash=" + seamHash, // start_block <= overlap
	} {
		o, err := ParseURI(bad)
		if err == nil {
			_, err = New(o)
		}
		if !errcode.Is(err, CodeInvalidOption) {
			t.Errorf("%s: %v, want %s", bad, err, CodeInvalidOption)
		}
	}
}
