package ethrpc

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

var sampleBlock = `{"number":"0x18e0a2a","hash":"0x2F1C9B6E3A7D4E8F0A1B2C3D4E5F60718293A4B5C6D7E8F90A1B2C3D4E5F6071",
"parentHash":"0x1111111111111111111111111111111111111111111111111111111111111111",
"timestamp":"0x65f0a3c1","miner":"0x95222290DD7278Aa3Ddd389Cc1E1d165CC4BAfe5","gasUsed":"0x1c9c380",
"transactions":["0xaa","0xbb"],"extraData":"0xD883",
"nonce":"0x0000000000000042","sha3Uncles":"0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347",
"logsBloom":"0x` + bloomHex + `",
"transactionsRoot":"0x2222222222222222222222222222222222222222222222222222222222222222",
"stateRoot":"0x3333333333333333333333333333333333333333333333333333333333333333",
"receiptsRoot":"0x4444444444444444444444444444444444444444444444444444444444444444",
"difficulty":"0x2f8e6c9b1a3d4e","totalDifficulty":"0xc70d815d562d3cfa955","size":"0xd431","gasLimit":"0x3938700",
"baseFeePerGas":"0x3b9aca00","withdrawalsRoot":"0x5555555555555555555555555555555555555555555555555555555555555555",
"mixHash":"0x6666666666666666666666666666666666666666666666666666666666666666","uncles":[],"withdrawals":[]}`

const bloomHex = "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000080"

func TestParseBlock(t *testing.T) {
	r, err := parseBlock([]byte(sampleBlock))
	if err != nil {
		t.Fatal(err)
	}
	want := blockRow{Number: 0x18e0a2a, Hash: "0x2f1c9b6e3a7d4e8f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071",
		ParentHash: "0x" + strings.Repeat("11", 32), BlockTS: 0x65f0a3c1 * 1_000_000,
		Miner: "0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5", TransactionCount: 2, GasUsed: 30_000_000,
		Full: true, Nonce: "0x0000000000000042", Sha3Uncles: "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347",
		LogsBloom: "0x" + bloomHex, TransactionsRoot: "0x" + strings.Repeat("22", 32), StateRoot: "0x" + strings.Repeat("33", 32),
		ReceiptsRoot: "0x" + strings.Repeat("44", 32), Difficulty: 0x2f8e6c9b1a3d4e, TotalDifficulty: 58750003716598352816469,
		HasTotalDifficulty: true, Size: 0xd431, ExtraData: "0xd883", GasLimit: 60_000_000,
		BaseFeePerGas: 1_000_000_000, HasBaseFee: true, WithdrawalsRoot: "0x" + strings.Repeat("55", 32), HasWithdrawalsRoot: true}
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	// Hydrated transactions count the same.
	hyd := strings.Replace(sampleBlock, `["0xaa","0xbb"]`, `[{"hash":"0xaa"},{"hash":"0xbb"},{}]`, 1)
	if r, err := parseBlock([]byte(hyd)); err != nil || r.TransactionCount != 3 {
		t.Fatalf("%+v %v", r, err)
	}
	for name, mut := range map[string][2]string{
		"null":              {sampleBlock, "null"},
		"missing hash":      {`"hash"`, `"hashX"`},
		"short miner":       {`"0x95222290DD7278Aa3Ddd389Cc1E1d165CC4BAfe5"`, `"0x9522"`},
		"leading zero":      {`"0x18e0a2a"`, `"0x018e0a2a"`},
		"number as number":  {`"0x18e0a2a"`, `26086570`},
		"no transactions":   {`"transactions":["0xaa","0xbb"],`, ``},
		"ts overflow":       {`"0x65f0a3c1"`, `"0x` + strings.Repeat("f", 15) + `"`},
		"gas overflow":      {`"0x1c9c380"`, `"0xffffffffffffffff"`},
		"non-hex hash":      {`0x2F1C9B6E`, `0x2G1C9B6E`},
		"short nonce":       {`"0x0000000000000042"`, `"0x42"`},
		"no nonce":          {`"nonce":`, `"nonceX":`},
		"null nonce":        {`"0x0000000000000042"`, `null`},
		"short bloom":       {`"0x` + bloomHex + `"`, `"0x00"`},
		"no stateRoot":      {`"stateRoot":`, `"stateroots":`},
		"odd extraData":     {`"0xD883"`, `"0xD88"`},
		"extraData no 0x":   {`"0xD883"`, `"D883"`},
		"difficulty zero":   {`"0x2f8e6c9b1a3d4e"`, `"0x02f8e6c9b1a3d4e"`},
		"difficulty 257b":   {`"0x2f8e6c9b1a3d4e"`, `"0x1` + strings.Repeat("0", 64) + `"`},
		"td not hex":        {`"0xc70d815d562d3cfa955"`, `"58750003716598352816469"`},
		"base fee overflow": {`"0x3b9aca00"`, `"0x8000000000000000"`},
		"base fee number":   {`"0x3b9aca00"`, `1000000000`},
		"bad withdrawals":   {`"0x5555555555555555555555555555555555555555555555555555555555555555"`, `"0x55"`},
		"no gasLimit":       {`"gasLimit":`, `"gas_limit":`},
		"no size":           {`"size":`, `"sizes":`},
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

// TestParseBlockNulls: the fork-dependent fields (and totalDifficulty, which
// go-ethereum no longer reports) are null when missing or null, on both
// decoders; the other fields stay required.
func TestParseBlockNulls(t *testing.T) {
	preLondon := strings.NewReplacer(`"baseFeePerGas":"0x3b9aca00",`, ``,
		`"withdrawalsRoot":"0x5555555555555555555555555555555555555555555555555555555555555555",`, ``,
		`"totalDifficulty":"0xc70d815d562d3cfa955",`, ``).Replace(sampleBlock)
	nulls := strings.NewReplacer(`"0x3b9aca00"`, `null`, `"0x5555555555555555555555555555555555555555555555555555555555555555"`, `null`,
		`"0xc70d815d562d3cfa955"`, ` null `).Replace(sampleBlock)
	for name, in := range map[string]string{"missing": preLondon, "null": nulls} {
		if in == sampleBlock {
			t.Fatalf("%s: replacement did not apply", name)
		}
		r, err := parseBlock([]byte(in))
		if err != nil || !r.Full || r.HasBaseFee || r.HasWithdrawalsRoot || r.HasTotalDifficulty || r.BaseFeePerGas != 0 {
			t.Fatalf("%s: %+v %v", name, r, err)
		}
		var fast blockResult
		if err := json.Unmarshal([]byte(in), &fast); err != nil || fast.err != nil || fast.row != r {
			t.Fatalf("%s: fast %+v %v, reference %+v", name, fast.row, fast.err, r)
		}
		b := (&Source{env: stream.SourceEnv{Columns: ethblock.Columns}}).toBatch([]blockRow{r, mustParse(t, sampleBlock)})
		for _, c := range b.Columns {
			col, _ := ethblock.Lookup(c.Name)
			if c.IsNull(0) != col.Nullable || c.IsNull(1) {
				t.Fatalf("%s: column %s nulls %v", name, c.Name, c.Valid)
			}
		}
	}
}

func mustParse(t *testing.T, s string) blockRow {
	t.Helper()
	r, err := parseBlock([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// FuzzParseBlock: any bytes from the network either parse into a row that
// satisfies the column invariants, or fail with an error; never a panic.
func FuzzParseBlock(f *testing.F) {
	f.Add([]byte(sampleBlock))
	f.Add([]byte("null"))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"number":"0x0","hash":"0x","transactions":null}`))
	f.Add([]byte(`{"number":"0x7fffffffffffffff","timestamp":"0x20c49ba5e353f7"}`))
	f.Add([]byte(strings.Replace(sampleBlock, `"0x3b9aca00"`, `null`, 1)))
	f.Add([]byte(strings.Replace(sampleBlock, `"0xD883"`, `"0x"`, 1)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := parseBlock(raw)
		if err != nil {
			return
		}
		if r.Number < 0 || r.BlockTS < 0 || r.GasUsed < 0 || r.TransactionCount < 0 || r.BlockTS%1_000_000 != 0 {
			t.Fatalf("negative or odd value in %+v", r)
		}
		for _, h := range []string{r.Hash, r.ParentHash, r.Sha3Uncles, r.TransactionsRoot, r.StateRoot, r.ReceiptsRoot} {
			if len(h) != 66 || h != strings.ToLower(h) || common.HexToHash(h).Hex() != h {
				t.Fatalf("bad hash %q", h)
			}
		}
		if len(r.Miner) != 42 || strings.ToLower(common.HexToAddress(r.Miner).Hex()) != r.Miner {
			t.Fatalf("bad miner %q", r.Miner)
		}
		if !r.Full || len(r.Nonce) != 18 || len(r.LogsBloom) != 514 || r.Difficulty < 0 || r.Size < 0 || r.GasLimit < 0 ||
			r.BaseFeePerGas < 0 || r.HasBaseFee != (r.BaseFeePerGas != 0 || r.HasBaseFee) || (r.HasWithdrawalsRoot != (r.WithdrawalsRoot != "")) {
			t.Fatalf("bad extended columns %+v", r)
		}
		for _, h := range []string{r.Nonce, r.LogsBloom, r.ExtraData, r.WithdrawalsRoot} {
			if _, err := hexutil.Decode(h); h != strings.ToLower(h) || (h != "" && err != nil && err != hexutil.ErrEmptyString) {
				t.Fatalf("bad hex %q: %v", h, err)
			}
		}
		// Round trip: the row re-encoded as RPC JSON parses to itself.
		m := map[string]any{
			"number": hexutil.Uint64(r.Number), "hash": r.Hash, "parentHash": r.ParentHash,
			"timestamp": hexutil.Uint64(r.BlockTS / 1_000_000), "miner": r.Miner, "gasUsed": hexutil.Uint64(r.GasUsed),
			"transactions": make([]string, r.TransactionCount),
			"nonce":        r.Nonce, "sha3Uncles": r.Sha3Uncles, "logsBloom": r.LogsBloom, "transactionsRoot": r.TransactionsRoot,
			"stateRoot": r.StateRoot, "receiptsRoot": r.ReceiptsRoot, "difficulty": bigHex(r.Difficulty),
			"size": hexutil.Uint64(r.Size), "extraData": r.ExtraData, "gasLimit": hexutil.Uint64(r.GasLimit),
		}
		if r.HasTotalDifficulty {
			m["totalDifficulty"] = bigHex(r.TotalDifficulty)
		}
		if r.HasBaseFee {
			m["baseFeePerGas"] = hexutil.Uint64(r.BaseFeePerGas)
		}
		if r.HasWithdrawalsRoot {
			m["withdrawalsRoot"] = r.WithdrawalsRoot
		}
		enc, _ := json.Marshal(m)
		r2, err := parseBlock(enc)
		if err != nil || r2 != r {
			t.Fatalf("round trip %+v -> %+v (%v)", r, r2, err)
		}
	})
}

// bigHex renders an integral double as a hex quantity.
func bigHex(f float64) string {
	v, _ := new(big.Float).SetFloat64(f).Int(nil)
	return hexutil.EncodeBig(v)
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
	f.Add([]byte(strings.Replace(sampleBlock, `"0x3b9aca00"`, `null`, 1)))
	f.Add([]byte(strings.Replace(sampleBlock, `"0x3b9aca00"`, `nul`, 1)))
	f.Add([]byte(strings.Replace(sampleBlock, `"baseFeePerGas"`, `"BaseFeePerGas"`, 1)))
	f.Add([]byte(strings.Replace(sampleBlock, `"0x5555555555555555555555555555555555555555555555555555555555555555"`, `[null]`, 1)))
	f.Add([]byte(strings.Replace(sampleBlock, `"nonce":"0x0000000000000042"`, `"nonce":null`, 1)))
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
