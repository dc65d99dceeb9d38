package ethrpc

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
)

func TestParseURI(t *testing.T) {
	h := "0x" + strings.Repeat("0a", 32)
	for _, tc := range []struct {
		uri  string
		want Options
		err  string // substring of the error; "" = success
	}{
		{uri: "http://127.0.0.1:8545?maxBlocksPerTrigger=20&start_block=26086570&confirmations=0",
			want: Options{Endpoints: []string{"http://127.0.0.1:8545"}, MaxBlocksPerTrigger: 20, StartBlock: 26086570}},
		{uri: "ethrpc:ws://127.0.0.1:8546",
			want: Options{Endpoints: []string{"ws://127.0.0.1:8546"}}},
		{uri: "https://a.example/v3/key?endpoints=http://127.0.0.1:1,wss://b.example/x&finality=finalized&start_parent_hash=" + strings.ToUpper(h[2:]) + "x",
			err: "start_parent_hash"},
		{uri: "https://a.example/v3/key?endpoints=http://127.0.0.1:1,wss://b.example/x&finality=finalized&start_parent_hash=" + h +
			"&maxBatchSize=10&timeout=3s&maxRetries=2&confirmations=12",
			want: Options{Endpoints: []string{"https://a.example/v3/key", "http://127.0.0.1:1", "wss://b.example/x"}, Finality: "finalized",
				StartParentHash: h, MaxBatchSize: 10, Timeout: 3 * time.Second, MaxRetries: 2, Confirmations: 12}},
		{uri: "?endpoints=http://127.0.0.1:1&max_blocks_per_trigger=5&startBlock=7",
			want: Options{Endpoints: []string{"http://127.0.0.1:1"}, MaxBlocksPerTrigger: 5, StartBlock: 7}},
		{uri: "http://127.0.0.1:8545?reorg=retract&reorgDepth=8",
			want: Options{Endpoints: []string{"http://127.0.0.1:8545"}, Reorg: ReorgRetract, ReorgDepth: 8}},
		{uri: "http://127.0.0.1:8545?reorg=fail", want: Options{Endpoints: []string{"http://127.0.0.1:8545"}, Reorg: ReorgFail}},
		{uri: "http://127.0.0.1:8545?reorg=undo", err: "reorg"},
		{uri: "http://127.0.0.1:8545?reorg=retract&reorg_depth=0", err: "reorg_depth"},
		{uri: "http://127.0.0.1:8545?reorg=retract&reorgDepth=5000", err: "reorgDepth"},
		{uri: "http://127.0.0.1:8545?maxFilesPerTrigger=5", err: `unknown ethrpc option "maxFilesPerTrigger"`},
		{uri: "http://127.0.0.1:8545?start_block=-1", err: "start_block"},
		{uri: "http://127.0.0.1:8545?maxBlocksPerTrigger=0", err: "maxBlocksPerTrigger"},
		{uri: "http://127.0.0.1:8545?finality=latest", err: "finality"},
		{uri: "http://127.0.0.1:8545?start_block=1&startBlock=2", err: "more than once"},
		{uri: "http://127.0.0.1:8545?timeout=soon", err: "timeout"},
		{uri: "ftp://127.0.0.1:8545", err: "scheme"},
		{uri: "?confirmations=1", err: "no endpoint"},
		{uri: "http://127.0.0.1:8545?a=%zz", err: "parse"},
	} {
		got, err := ParseURI(tc.uri)
		if tc.err != "" {
			if !errcode.Is(err, CodeInvalidOption) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURI(%q) err = %v, want %s containing %q", tc.uri, err, CodeInvalidOption, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURI(%q): %v", tc.uri, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURI(%q) = %+v, want %+v", tc.uri, got, tc.want)
		}
		if _, err := New(got); err != nil {
			t.Errorf("New(ParseURI(%q)): %v", tc.uri, err)
		}
	}
}

func TestRedactHidesKeys(t *testing.T) {
	for in, want := range map[string]string{
		"https://mainnet.infura.io/v3/SECRET": "https://mainnet.infura.io/…",
		"https://rpc.example/?apikey=SECRET":  "https://rpc.example/…",
		"http://127.0.0.1:8545":               "http://127.0.0.1:8545",
		"http://127.0.0.1:8545/":              "http://127.0.0.1:8545",
		"::bad":                               "<unparsable url>",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
	s, _ := New(Options{Endpoints: []string{"https://mainnet.infura.io/v3/SECRET"}})
	if strings.Contains(s.Description(), "SECRET") {
		t.Fatal(s.Description())
	}
}

func TestOffsetJSON(t *testing.T) {
	o := Offset{Block: 26086570, Hash: "0x" + strings.Repeat("ab", 32)}
	want := `{"block":26086570,"hash":"0x` + strings.Repeat("ab", 32) + `"}`
	if string(o.JSON()) != want {
		t.Fatalf("%s", o.JSON())
	}
	// Spacing and case in a stored offset still parse to the same position,
	// which then renders byte-identically.
	p, ok, err := ParseOffset([]byte(` { "hash" : "0X` + strings.Repeat("AB", 32) + `", "block": 26086570 }`))
	if err != nil || !ok || string(p.JSON()) != want {
		t.Fatalf("%v %v %s", ok, err, p.JSON())
	}
	if _, ok, err := ParseOffset(nil); ok || err != nil {
		t.Fatal("nil offset")
	}
	for _, bad := range []string{`{"block":1}`, `{"hash":"0x00"}`, `[1]`, `{"block":-1,"hash":"` + o.Hash + `"}`, `{"block":1,"hash":"0x12"}`} {
		if _, _, err := ParseOffset([]byte(bad)); !errcode.Is(err, errcode.CheckpointCorrupt) {
			t.Errorf("ParseOffset(%s) = %v, want CHECKPOINT_CORRUPT", bad, err)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"3600":                          retryAfterMax,
		"Sun, 29 Nov 2026 12:00:05 GMT": 5 * time.Second,
		"Sun, 29 Nov 2026 11:00:00 GMT": 0,
		"soon":                          0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}
