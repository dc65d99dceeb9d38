package ethrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// rendezvousProxy forwards to the in-repo node, holding each batch request
// until batches with every one of methods have arrived (or giveUp passes:
// then the batch counts as late), so a source that sends them one after
// another is seen, without timing anything.
type rendezvousProxy struct {
	methods []string
	next    http.Handler

	mu   sync.Mutex
	seen map[string]bool
	all  chan struct{}
	late int
}

const giveUp = 10 * time.Second

func (p *rendezvousProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msgs []struct{ Method string }
	if json.Unmarshal(body, &msgs) == nil {
		p.mu.Lock()
		for _, m := range msgs {
			p.seen[m.Method] = true
		}
		all := true
		for _, m := range p.methods {
			all = all && p.seen[m]
		}
		if all {
			select {
			case <-p.all:
			default:
				close(p.all)
			}
		}
		p.mu.Unlock()
		select {
		case <-p.all:
		case <-time.After(giveUp):
			p.mu.Lock()
			p.late++
			p.mu.Unlock()
		}
	}
	p.next.ServeHTTP(w, r)
}

// TestTableLiveBlockCallsAtOnce: a table source's one-block batch (a live
// batch at the head) asks for the header, the transactions and the receipts
// at once, not each after the previous answer, and emits the block's rows.
func TestTableLiveBlockCallsAtOnce(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 1, ethnode.Faults{})
	target, err := url.Parse(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	p := &rendezvousProxy{methods: []string{"eth_getBlockByNumber", "eth_getBlockByHash", "eth_getBlockReceipts"},
		next: httputil.NewSingleHostReverseProxy(target), seen: map[string]bool{}, all: make(chan struct{})}
	srv := httptest.NewServer(p)
	defer srv.Close()
	s, _ := openSource(t, Options{Endpoints: []string{srv.URL}, Table: "transactions", MaxBlocksPerTrigger: 1}, nil)
	start := Offset{Block: m.LastBlock, Hash: m.LastHash}.JSON()
	end := Offset{Block: m.LastBlock + 1, Hash: lowerHex(n.Header(m.LastBlock + 1).Hash().Hex())}.JSON()
	var got int
	if err := s.ReadBatch(context.Background(), start, end, func(b *stream.Batch) error { got += b.Len; return nil }); err != nil {
		t.Fatal(err)
	}
	if p.late != 0 {
		t.Errorf("%d batch requests waited for the others' calls in vain: the calls went one after another", p.late)
	}
	hdr, err := s.fetchRange(context.Background(), []uint64{m.LastBlock + 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := hdr[0].TransactionCount; int64(got) != want || want == 0 {
		t.Errorf("emitted %d rows, the block has %d transactions", got, want)
	}
}

// TestTableLiveBlockReorg: a one-block batch whose block was replaced at
// its number since it was planned fails as a reorg (the header checked
// against the planned hash), though its bodies were asked for by that hash.
func TestTableLiveBlockReorg(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 1, ethnode.Faults{})
	s, _ := openSource(t, Options{Endpoints: []string{n.URL()}, Table: "transactions", MaxBlocksPerTrigger: 1}, nil)
	start := Offset{Block: m.LastBlock, Hash: m.LastHash}.JSON()
	gone := "0x" + strings.Repeat("ab", 32)
	end := Offset{Block: m.LastBlock + 1, Hash: gone}.JSON()
	err := s.ReadBatch(context.Background(), start, end, func(*stream.Batch) error { return nil })
	if !errcode.Is(err, CodeReorgDetected) || !strings.Contains(err.Error(), "the planned batch recorded "+gone) {
		t.Fatalf("got %v, want %s: the planned batch recorded %s", err, CodeReorgDetected, gone)
	}
}
