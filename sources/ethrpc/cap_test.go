package ethrpc

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// hugeAnswer serves a JSON-RPC answer of total bytes (one endless string
// result), streamed in chunks, or announced by Content-Length first; it
// counts what it managed to send before the client hung up.
func hugeAnswer(t *testing.T, total int64, announce bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if announce {
			w.Header().Set("Content-Length", strconv.FormatInt(total, 10))
		}
		head := []byte(`{"jsonrpc":"2.0","id":1,"result":"0x`)
		n, err := w.Write(head)
		sent.Add(int64(n))
		if err != nil {
			return
		}
		tail := []byte(`"}`)
		chunk := []byte(strings.Repeat("a", 1<<20))
		for left := total - int64(len(head)+len(tail)); left > 0; left -= int64(len(chunk)) {
			n, err := w.Write(chunk[:min(int64(len(chunk)), left)])
			sent.Add(int64(n))
			if err != nil || r.Context().Err() != nil {
				return
			}
		}
		n, _ = w.Write(tail)
		sent.Add(int64(n))
	}))
	t.Cleanup(srv.Close)
	return srv, &sent
}

// TestResponseCapped: a node answering 2 GiB (issue 28: "read without a
// cap: 884 MB RSS") is cut off at maxResponseSize (the 64 MiB default)
// with RPC_RESPONSE_TOO_LARGE naming the endpoint and the cap, not
// retried, and read no further: the node sends little more than the cap
// and the client allocates a bounded multiple of it, not the answer.
// An answer whose Content-Length exceeds the cap is refused unread.
func TestResponseCapped(t *testing.T) {
	const answer = 2 << 30
	for _, announce := range []bool{false, true} {
		t.Run("announce="+strconv.FormatBool(announce), func(t *testing.T) {
			srv, sent := hugeAnswer(t, answer, announce)
			p := newPool([]string{srv.URL}, stream.SystemClock{}, time.Minute, 3, DefaultMaxResponseSize, slog.New(slog.DiscardHandler))
			defer p.close()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var bn hexutil.Uint64
			err := p.call(context.Background(), "eth_blockNumber", func(ctx context.Context, c *rpc.Client) error {
				return c.CallContext(ctx, &bn, "eth_blockNumber")
			})
			runtime.ReadMemStats(&after)
			if errcode.Code(err) != CodeResponseTooLarge {
				t.Fatalf("a 2 GiB answer: %v, want %s", err, CodeResponseTooLarge)
			}
			for _, want := range []string{srv.URL, strconv.Itoa(DefaultMaxResponseSize), "To fix"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not name %q", err, want)
				}
			}
			if p.mu.retries != 0 {
				t.Errorf("an over-cap answer was retried %d times", p.mu.retries)
			}
			// The node's writes stop at the cap plus the sockets' buffers.
			if s := sent.Load(); s > DefaultMaxResponseSize+32<<20 {
				t.Errorf("the node sent %d bytes: the answer was read past the cap", s)
			}
			if announce && sent.Load() > 8<<20 {
				t.Errorf("an announced over-cap answer was read (%d bytes sent)", sent.Load())
			}
			t.Logf("the node sent %d MiB of %d MiB; the client allocated %d MiB", sent.Load()>>20, answer>>20, (after.TotalAlloc-before.TotalAlloc)>>20)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 6*DefaultMaxResponseSize {
				t.Errorf("the client allocated %d MiB for a capped answer", grew>>20)
			}
		})
	}
}

// TestResponseCapOption: maxResponseSize sets the cap (bytes or KiB, MiB,
// GiB); an answer under it is read, one over it refused.
func TestResponseCapOption(t *testing.T) {
	for v, want := range map[string]int64{"1024": 1024, "8KiB": 8 << 10, "64MiB": 64 << 20, "2GiB": 2 << 30} {
		o, err := ParseURI("ethrpc:http://127.0.0.1:8545?maxResponseSize=" + v)
		if err != nil || o.MaxResponseSize != want {
			t.Fatalf("maxResponseSize=%s: %d, %v; want %d", v, o.MaxResponseSize, err, want)
		}
	}
	for _, v := range []string{"0", "-1", "1MB", "x", "9223372036854775807GiB"} {
		if _, err := ParseURI("ethrpc:http://127.0.0.1:8545?maxResponseSize=" + v); errcode.Code(err) != CodeInvalidOption {
			t.Fatalf("maxResponseSize=%s: %v, want %s", v, err, CodeInvalidOption)
		}
	}
	srv, _ := hugeAnswer(t, 4<<10, false)
	for limit, ok := range map[int64]bool{8 << 10: false, 1 << 10: true} {
		p := newPool([]string{srv.URL}, stream.SystemClock{}, time.Minute, 0, limit, slog.New(slog.DiscardHandler))
		var res string
		err := p.call(context.Background(), "eth_blockNumber", func(ctx context.Context, c *rpc.Client) error {
			return c.CallContext(ctx, &res, "eth_blockNumber")
		})
		p.close()
		if tooLarge := errcode.Code(err) == CodeResponseTooLarge; tooLarge != ok || (!ok && (err != nil || len(res) != 4<<10-len(`{"jsonrpc":"2.0","id":1,"result":""}`))) {
			t.Fatalf("a 4 KiB answer under a %d-byte cap: %v (%d bytes read)", limit, err, len(res))
		}
	}
}

// bigService answers big_answer with a string of the asked length.
type bigService struct{}

func (bigService) Answer(n int) string { return strings.Repeat("a", n) }

// TestResponseCappedOverWebsocket: over ws the cap is the websocket's
// message limit (go-ethereum's default is 32 MiB, not ours): an answer
// above maxResponseSize is RPC_RESPONSE_TOO_LARGE, as over http.
func TestResponseCappedOverWebsocket(t *testing.T) {
	srv := rpc.NewServer()
	if err := srv.RegisterName("big", bigService{}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.WebsocketHandler([]string{"*"}))
	t.Cleanup(func() { hs.Close(); srv.Stop() })
	url := "ws" + strings.TrimPrefix(hs.URL, "http")
	const limit = 64 << 10
	p := newPool([]string{url}, stream.SystemClock{}, time.Minute, 3, limit, slog.New(slog.DiscardHandler))
	defer p.close()
	call := func(n int) error {
		return p.call(context.Background(), "big_answer", func(ctx context.Context, c *rpc.Client) error {
			var s string
			return c.CallContext(ctx, &s, "big_answer", n)
		})
	}
	if err := call(limit / 2); err != nil {
		t.Fatalf("an answer under the cap: %v", err)
	}
	err := call(4 * limit)
	if errcode.Code(err) != CodeResponseTooLarge || !strings.Contains(err.Error(), strconv.Itoa(limit)) {
		t.Fatalf("an answer of 4x the cap over ws: %v, want %s naming the cap", err, CodeResponseTooLarge)
	}
}
