package ethnode

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// TestMinedAnswerIsRendered: the answer cached at mining is the one a read
// renders from regenerated transactions, for mined and reorganised blocks.
func TestMinedAnswerIsRendered(t *testing.T) {
	n := startTestNode(t, Options{Manual: true, CachedBlocks: 3})
	n.Mine(5)
	n.Reorg(1)
	n.mu.RLock()
	var blocks []*nodeBlock // the replaced block included
	for _, b := range n.byHash {
		blocks = append(blocks, b)
	}
	n.mu.RUnlock()
	cached := 0
	for _, b := range blocks {
		want, err := n.renderBlock(b, false)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := n.cachedJSON(b.hash); ok {
			cached++
			if !bytes.Equal(got, want) {
				t.Errorf("block %d: cached\n%.200s\nrendered\n%.200s", b.header.Number, got, want)
			}
		}
	}
	if cached != 3 {
		t.Errorf("%d of %d blocks cached, want the cache's 3", cached, len(blocks))
	}
}

// TestReadAhead: reading a block renders the ones after it that the cache
// no longer holds, as a reader going through them finds them.
func TestReadAhead(t *testing.T) {
	n := startTestNode(t, Options{Manual: true, InitialBlocks: 200})
	n.cmu.Lock()
	n.cached, n.corder = nil, nil // as if evicted
	n.cmu.Unlock()
	post(t, n.URL(), `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["`+hexutil.EncodeUint64(n.base+10)+`",false]}`)
	deadline := time.Now().Add(time.Minute)
	for num := n.base + 11; num <= n.base+10+readAheadBlocks; num++ {
		for !n.isCached(n.Header(num).Hash()) {
			if time.Now().After(deadline) {
				t.Fatalf("block %d (read %d) not rendered ahead", num, n.base+10)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if n.isCached(n.Header(n.base + 11 + readAheadBlocks).Hash()) {
		t.Errorf("rendered past the read-ahead window")
	}
}

// TestBlockReadsAgreeWithRPCServer: every request the fast path answers gets
// the answer the rpc.Server gives (as JSON values), and every request it
// does not take reaches the rpc.Server.
func TestBlockReadsAgreeWithRPCServer(t *testing.T) {
	n := startTestNode(t, Options{Manual: true, InitialBlocks: 70})
	b0 := hexutil.EncodeUint64(n.base)
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"eth_getBlockByNumber","params":` + params + `}`
	}
	taken := []string{
		call("1", `["`+b0+`",false]`),
		"[" + call("1", `["`+b0+`",false]`) + "," + call(`"x"`, `["latest",false]`) + "," + call("3", `["safe",true]`) + "," +
			call("4", `["finalized",false]`) + "," + call("5", `["earliest",false]`) + "," + call("6", `["0xffffff0",false]`) + "]",
		" \n" + call("7", `["pending", true]`),
	}
	for _, body := range taken {
		fast := post(t, n.URL(), body)
		slow := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		n.rpc.ServeHTTP(slow, req)
		if !sameJSON(t, fast, slow.Body.Bytes()) {
			t.Errorf("request %.80s: fast path answered\n%.300s\nrpc.Server answered\n%.300s", body, fast, slow.Body.Bytes())
		}
		if !n.serveBlockReads(httptest.NewRecorder(), jsonRequest(body)) {
			t.Errorf("request %.80s: not taken by the fast path", body)
		}
	}
	left := []string{
		`[]`, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`,
		"[" + call("1", `["`+b0+`",false]`) + `,{"jsonrpc":"2.0","id":2,"method":"eth_chainId","params":[]}]`,
		`{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`, // a notification
		call("1", `["`+b0+`"]`), call("1", `["`+b0+`",null]`), call("1", `["nope",false]`), `{"jsonrpc":`,
	}
	for _, body := range left {
		if n.serveBlockReads(httptest.NewRecorder(), jsonRequest(body)) {
			t.Errorf("request %s: taken by the fast path", body)
		}
		r := jsonRequest(body)
		n.serveBlockReads(httptest.NewRecorder(), r)
		if rest, _ := io.ReadAll(r.Body); string(rest) != body {
			t.Errorf("request %s: body left for the rpc.Server is %q", body, rest)
		}
	}
	// One the node answers as the rpc.Server does, through the whole handler.
	if got := post(t, n.URL(), left[1]); !bytes.Contains(got, []byte(`"result":"`+hexutil.EncodeUint64(n.Head())+`"`)) {
		t.Errorf("eth_blockNumber answered %s", got)
	}
}

func jsonRequest(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func post(t *testing.T, url, body string) []byte {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %.80s: %d %v", body, resp.StatusCode, err)
	}
	return b
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
