package ethrpc

import (
	"context"
	"reflect"
	"testing"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestBatchesOverWebsocket: the blocks and transactions sources read over
// ws (their batches on batchws.go's own connection) the rows they read over
// http from the same node, and a table batch above maxResponseSize over ws
// is RPC_RESPONSE_TOO_LARGE, as over http.
func TestBatchesOverWebsocket(t *testing.T) {
	m := testManifest(t)
	const span = 50 // blocks: two concurrent batches (parallelism); a table reads 6
	n := startChainNode(t, span, ethnode.Faults{})
	ctx := context.Background()
	start := Offset{Block: m.LastBlock, Hash: m.LastHash}.JSON()
	endAt := func(k uint64) stream.Offset {
		return Offset{Block: m.LastBlock + k, Hash: lowerHex(n.Header(m.LastBlock + k).Hash().Hex())}.JSON()
	}
	read := func(o Options) ([]map[string]any, error) {
		o.MaxBlocksPerTrigger = span
		end := endAt(span)
		if o.Table != "" {
			end = endAt(6)
		}
		s, _ := openSource(t, o, nil)
		var rows []map[string]any
		err := s.ReadBatch(ctx, start, end, func(b *stream.Batch) error {
			for i := range b.Len {
				rows = append(rows, streamtest.Values(b, i))
			}
			return nil
		})
		return rows, err
	}
	for _, table := range []string{"", "transactions"} {
		overHTTP, err := read(Options{Endpoints: []string{n.URL()}, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		overWS, err := read(Options{Endpoints: []string{n.WebsocketURL()}, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		if len(overHTTP) == 0 || !reflect.DeepEqual(overWS, overHTTP) {
			t.Errorf("table %q: %d rows over ws, %d over http, or they differ", table, len(overWS), len(overHTTP))
		}
	}
	_, err := read(Options{Endpoints: []string{n.WebsocketURL()}, Table: "transactions", MaxResponseSize: 64 << 10})
	if errcode.Code(err) != CodeResponseTooLarge {
		t.Fatalf("a table batch over the cap over ws: %v, want %s", err, CodeResponseTooLarge)
	}
}
