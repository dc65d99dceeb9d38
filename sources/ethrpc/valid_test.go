package ethrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/internal/cputime"
)

// validCases are inputs at the edges of the grammar; TestValidJSON and
// FuzzValidJSON's seeds compare validJSON with json.Valid on each.
var validCases = []string{
	``, ` `, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `1e07`, `+1`, `-01`, `2.0e3x`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `nulll`, `True`,
	`""`, `"`, `"abc`, `"a\"b"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00G9"`, `"\u12"`, `"\x"`, `"\`,
	"\"a\tb\"", "\"a\x1fb\"", "\"\x7f\xff\xfe\"", "\"héllo\"", `"0123456789abcdef0123456789abcdef"`,
	`"0123456789abcd\"ef0123456789abcdef"`, "\"0123456789abcdef01234\n56789abcdef\"", `"0123456789abcdef0123456789abcde\`,
	`[]`, `[ ]`, `[`, `]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, `[[[]]]`, `[[[]]`, `[]]`,
	`{}`, `{ }`, `{"a":1}`, `{"a" : 1 , "b":[true]}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `{,}`, `{"a":1]`, `[1}`,
	`{"a":{"b":{"c":[1,{"d":null}]}}}`, ` {"a":1} `, `{"a":1} x`, `1 2`, "\t\r\n[1]\n", "\v1", `{"\u0022":"\\"}`,
	strings.Repeat(`[`, maxNestingDepth) + strings.Repeat(`]`, maxNestingDepth),
	strings.Repeat(`[`, maxNestingDepth+1) + strings.Repeat(`]`, maxNestingDepth+1),
	strings.Repeat(`{"a":`, maxNestingDepth) + `1` + strings.Repeat(`}`, maxNestingDepth),
	strings.Repeat(`[`, maxNestingDepth) + `{}` + strings.Repeat(`]`, maxNestingDepth),
	strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70), strings.Repeat(`[{"a":`, 70) + `0` + strings.Repeat(`}]`, 70),
	strings.Repeat(`[{"a":`, 70) + `0` + strings.Repeat(`]}`, 70),
}

func TestValidJSON(t *testing.T) {
	cases := append(append([]string{}, validCases...), batchAnswerCases...)
	cases = append(cases, sampleBlock, sampleBlock[:len(sampleBlock)/2])
	for _, c := range cases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.80q) = %v, json.Valid says %v", c, got, want)
		}
	}
}

// FuzzValidJSON: validJSON answers as json.Valid, the reference, on every
// input; a one-byte change of a valid document keeps them agreeing too.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(sampleBlock))
	f.Fuzz(func(t *testing.T, v []byte) {
		if got, want := validJSON(v), json.Valid(v); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", v, got, want)
		}
	})
}

// TestValidJSONEveryByte sets each byte of a batch answer to each byte
// class the grammar tells apart and compares validJSON with json.Valid on
// every result.
func TestValidJSONEveryByte(t *testing.T) {
	data := []byte(batchAnswerCases[0])
	if !validJSON(data) {
		t.Fatal("the answer is not valid")
	}
	mutated := bytes.Clone(data)
	for i := range data {
		for _, b := range []byte{'"', '\\', '\n', 0x1f, '{', '}', '[', ']', ',', ':', 'x', '0', '-', 'e', '.', 0xff} {
			mutated[i] = b
			if got, want := validJSON(mutated), json.Valid(mutated); got != want {
				t.Fatalf("byte %d set to %q: validJSON = %v, json.Valid says %v", i, b, got, want)
			}
		}
		mutated[i] = data[i]
	}
}

// TestValidJSONNodeAnswer: a transactions batch answer of the in-repo node
// is valid.
func TestValidJSONNodeAnswer(t *testing.T) {
	if data := tableBatchAnswer(t, 2); !validJSON(data) || !json.Valid(data) {
		t.Fatalf("validJSON %v, json.Valid %v", validJSON(data), json.Valid(data))
	}
}

// tableBatchAnswer is the in-repo node's answer to a transactions table's
// batch of blocks: each block hydrated and its receipts.
func tableBatchAnswer(t testing.TB, blocks int) []byte {
	n := startChainNode(t, blocks, ethnode.Faults{})
	hc := &http.Client{}
	var body strings.Builder
	body.WriteByte('[')
	for i := range blocks {
		if i > 0 {
			body.WriteByte(',')
		}
		h := n.Header(n.Head() - uint64(i)).Hash().Hex()
		fmt.Fprintf(&body, `{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByHash","params":[%q,true]},`+
			`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockReceipts","params":[%q]}`, 2*i+1, h, 2*i+2, h)
	}
	body.WriteByte(']')
	data, err := postBatch(context.Background(), hc, n.URL(), []byte(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// BenchmarkValidJSON validates a transactions batch answer of 4 blocks
// from the in-repo node: json.Valid, the pass decodeBatch made before, and
// validJSON.
func BenchmarkValidJSON(b *testing.B) {
	data := tableBatchAnswer(b, 4)
	for _, c := range []struct {
		name  string
		valid func([]byte) bool
	}{{"json.Valid", json.Valid}, {"validJSON", validJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			defer reportCPUPerOp(b, cputime.Self())
			for b.Loop() {
				if !c.valid(data) {
					b.Fatal("not valid")
				}
			}
		})
	}
}
