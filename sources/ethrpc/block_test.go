package ethrpc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

const sampleBlock = `{"number":"0x18e0a2a","hash":"0x2F1C9B6E3A7D4E8F0A1B2C3D4E5F60718293A4B5C6D7E8F90A1B2C3D4E5F6071",
"parentHash":"0x1111111111111111111111111111111111111111111111111111111111111111",
"timestamp":"0x65f0a3c1","miner":"0x95222290DD7278Aa3Ddd389Cc1E1d165CC4BAfe5","gasUsed":"0x1c9c380",
"transactions":["0xaa","0xbb"],"extraData":"0x"}`

func TestParseBlock(t *testing.T) {
	r, err := parseBlock([]byte(sampleBlock))
	if err != nil {
		t.Fatal(err)
	}
	want := blockRow{Number: 0x18e0a2a, Hash: "0x2f1c9b6e3a7d4e8f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071",
		ParentHash: "0x" + strings.Repeat("11", 32), BlockTS: 0x65f0a3c1 * 1_000_000,
		Miner: "0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5", TransactionCount: 2, GasUsed: 30_000_000}
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	// Hydrated transactions count the same.
	hyd := strings.Replace(sampleBlock, `["0xaa","0xbb"]`, `[{"hash":"0xaa"},{"hash":"0xbb"},{}]`, 1)
	if r, err := parseBlock([]byte(hyd)); err != nil || r.TransactionCount != 3 {
		t.Fatalf("%+v %v", r, err)
	}
	for name, mut := range map[string][2]string{
		"null":             {sampleBlock, "null"},
		"missing hash":     {`"hash"`, `"hashX"`},
		"short miner":      {`"0x95222290DD7278Aa3Ddd389Cc1E1d165CC4BAfe5"`, `"0x9522"`},
		"leading zero":     {`"0x18e0a2a"`, `"0x018e0a2a"`},
		"number as number": {`"0x18e0a2a"`, `26086570`},
		"no transactions":  {`"transactions":["0xaa","0xbb"],`, ``},
		"ts overflow":      {`"0x65f0a3c1"`, `"0x` + strings.Repeat("f", 15) + `"`},
		"gas overflow":     {`"0x1c9c380"`, `"0xffffffffffffffff"`},
		"non-hex hash":     {`0x2F1C9B6E`, `0x2G1C9B6E`},
	} {
		in := sampleBlock
		if name == "null" {
			in = "null"
		} else {
			in = strings.Replace(in, mut[0], mut[1], 1)
		}
		if _, err := parseBlock([]byte(in)); err == nil {
			t.Errorf("%s: accepted %s", name, in)
		}
	}
}

// FuzzParseBlock: any bytes from the network either parse into a row that
// satisfies the column invariants, or fail with an error; never a panic.
func FuzzParseBlock(f *testing.F) {
	f.Add([]byte(sampleBlock))
	f.Add([]byte("null"))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"number":"0x0","hash":"0x","transactions":null}`))
	f.Add([]byte(`{"number":"0x7fffffffffffffff","timestamp":"0x20c49ba5e353f7"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := parseBlock(raw)
		if err != nil {
			return
		}
		if r.Number < 0 || r.BlockTS < 0 || r.GasUsed < 0 || r.TransactionCount < 0 || r.BlockTS%1_000_000 != 0 {
			t.Fatalf("negative or odd value in %+v", r)
		}
		for _, h := range []string{r.Hash, r.ParentHash} {
			if len(h) != 66 || h != strings.ToLower(h) || common.HexToHash(h).Hex() != h {
				t.Fatalf("bad hash %q", h)
			}
		}
		if len(r.Miner) != 42 || strings.ToLower(common.HexToAddress(r.Miner).Hex()) != r.Miner {
			t.Fatalf("bad miner %q", r.Miner)
		}
		// Round trip: the row re-encoded as RPC JSON parses to itself.
		enc, _ := json.Marshal(map[string]any{
			"number": hexutil.Uint64(r.Number), "hash": r.Hash, "parentHash": r.ParentHash,
			"timestamp": hexutil.Uint64(r.BlockTS / 1_000_000), "miner": r.Miner, "gasUsed": hexutil.Uint64(r.GasUsed),
			"transactions": make([]string, r.TransactionCount),
		})
		r2, err := parseBlock(enc)
		if err != nil || r2 != r {
			t.Fatalf("round trip %+v -> %+v (%v)", r, r2, err)
		}
	})
}

// FuzzTxCount checks the allocation-free counter against the naive oracle
// (decoding into []json.RawMessage) on any valid JSON array.
func FuzzTxCount(f *testing.F) {
	for _, s := range []string{`[]`, `[ ]`, `["0xaa"]`, `["a,b","c\"],["]`, `[{"x":[1,2,{"y":"]"}]},[],[[]],null, 1]`, "[\n1 ,\t2\r]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var naive []json.RawMessage
		if json.Unmarshal(raw, &naive) != nil || naive == nil {
			return
		}
		var c txCount
		if err := json.Unmarshal(raw, &c); err != nil || int(c) != len(naive) {
			t.Fatalf("%s: counted %d (%v), want %d", raw, c, err, len(naive))
		}
	})
}

// FuzzFastParse: the single-pass decoder agrees with the reference decoder
// (encoding/json) on every valid JSON input, errors included.
func FuzzFastParse(f *testing.F) {
	f.Add([]byte(sampleBlock))
	f.Add([]byte(strings.Replace(sampleBlock, `"number"`, `"NUMBER"`, 1)))
	f.Add([]byte(strings.Replace(sampleBlock, `"miner"`, `"mi\u006eer"`, 1)))
	f.Add([]byte(strings.Replace(sampleBlock, `"extraData":"0x"`, `"x":{"a":[1,"]}",{"b":null}]},"number":"0x1"`, 1)))
	f.Add([]byte(`null`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`{"transactions":{}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		want, werr := parseBlock(raw)
		var res blockResult
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("blockResult.UnmarshalJSON failed: %v", err)
		}
		if (werr == nil) != (res.err == nil) || want != res.row {
			t.Fatalf("%s:\nfast %+v %v\nref  %+v %v", raw, res.row, res.err, want, werr)
		}
	})
}
