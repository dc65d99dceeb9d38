package join

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// sameRow compares two decoded rows by value, floats by their bits (NaN,
// -0), strings by their bytes (not their addresses).
func sameRow(a, b row) bool {
	return slices.EqualFunc(a, b, func(x, y value) bool {
		return x.null() == y.null() && x.n == y.n && (x.p == nil) == (y.p == nil) && x.s() == y.s()
	})
}

// encodeRowV1 is a format-1 keyWithIndexToValue value, as main's join
// wrote them before format 2: rowText in the state's string value.
func encodeRowV1(fields []stream.Field, r row, matched bool) []byte {
	return state.AppendStringValue(nil, string(rowText(fields, r, matched)))
}

// encodeCountV1 is a format-1 keyToNumValues value.
func encodeCountV1(n int64) []byte {
	return state.AppendStringValue(nil, `{"value":`+strconv.FormatInt(n, 10)+`}`)
}

// vals builds a row from Go values: int64, float64, string, nil (null).
func vals(xs ...any) row {
	r := make(row, len(xs))
	for i, x := range xs {
		switch v := x.(type) {
		case nil:
			r[i] = nullValue
		case int64:
			r[i] = intValue(v)
		case int:
			r[i] = intValue(int64(v))
		case float64:
			r[i] = floatValue(v)
		case string:
			r[i] = strValue(v)
		default:
			panic(fmt.Sprintf("vals: %T", x))
		}
	}
	return r
}

var fastTestTypes = []stream.Type{stream.Int64, stream.Timestamp, stream.Boolean, stream.Int32, stream.Date,
	stream.Float64, stream.Float32, stream.String, stream.Binary}

// randString draws from runes encodeRow must escape or keep: quotes,
// backslashes, control bytes, HTML-escaped ones, non-ASCII, U+2028.
func randString(rng *rand.Rand) string {
	pool := []rune{'a', 'z', '0', ' ', '"', '\\', '/', '\x00', '\x01', '\n', '\t', '\x1f', '\x7f', '<', '>', '&',
		'é', 'Ж', '中', '😀', '\u2028', '\u2029', '\ufffd', '\ufeff'}
	var b strings.Builder
	for range rng.IntN(12) {
		b.WriteRune(pool[rng.IntN(len(pool))])
	}
	return b.String()
}

func randFloat(rng *rand.Rand) float64 {
	switch rng.IntN(10) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	case 2:
		return math.Inf(-1)
	case 3:
		return math.Copysign(0, -1)
	case 4:
		return math.Float64frombits(rng.Uint64N(1 << 52)) // subnormal
	case 5:
		return math.MaxFloat64 * (rng.Float64()*2 - 1)
	case 6:
		return float64(rng.Int64N(1000) - 500)
	default:
		return math.Float64frombits(rng.Uint64())
	}
}

func randRow(rng *rand.Rand, fields []stream.Field) row {
	r := make(row, len(fields))
	for j, f := range fields {
		if rng.IntN(6) == 0 {
			r[j] = nullValue
			continue
		}
		switch f.Type.Storage() {
		case stream.Float64:
			r[j] = floatValue(randFloat(rng))
		case stream.String:
			r[j] = strValue(randString(rng))
		default:
			switch rng.IntN(4) {
			case 0:
				r[j] = intValue(math.MinInt64)
			case 1:
				r[j] = intValue(math.MaxInt64)
			default:
				r[j] = intValue(rng.Int64() >> rng.IntN(64))
			}
		}
	}
	return r
}

// TestFastDecodeRowDifferential: on encodeRow's output for random rows of
// every storage class the fast decoder takes its path (no fallback) and
// reads what the encoding/json decoder reads, and the original row.
func TestFastDecodeRowDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 43))
	names := []string{"a", "block_number", "ts", "é名", "x y", "parent_hash", "Matched", "value", ""}
	for it := range 3000 {
		n := rng.IntN(8)
		perm := rng.Perm(len(names))
		fields := make([]stream.Field, n)
		for j := range fields {
			fields[j] = stream.Field{Name: names[perm[j]], Type: fastTestTypes[rng.IntN(len(fastTestTypes))]}
		}
		r := randRow(rng, fields)
		matched := rng.IntN(2) == 0
		val := encodeRowV1(fields, r, matched)
		want, wm, err := decodeRowJSON(fields, val)
		if err != nil {
			t.Fatalf("#%d: generic decoder: %v", it, err)
		}
		if !fastNames(fields) {
			t.Fatalf("#%d: names %v refused", it, fields)
		}
		got, gm, ok := fastDecodeRow(fields, val)
		if !ok {
			t.Fatalf("#%d: fast decoder fell back on format 1's own text %q", it, val)
		}
		if !sameRow(got, want) || gm != wm || !sameRow(got, r) || gm != matched {
			t.Fatalf("#%d: fast %#v %v, generic %#v %v, encoded %#v %v", it, got, gm, want, wm, r, matched)
		}
	}
	for _, c := range []int64{0, 1, 42, math.MaxInt64} {
		if got, ok := fastDecodeCount(encodeCountV1(c)); !ok || got != c {
			t.Fatalf("count %d: fast %d %v", c, got, ok)
		}
	}
}

// TestFastDecodeRowFallsBack: texts the fast path does not recognise go
// to the generic decoder, which reads them (whitespace) or refuses them.
// The generic decoder reads the columns by position, as format 1 wrote
// them: another order is refused (it read it by name before).
func TestFastDecodeRowFallsBack(t *testing.T) {
	fields := []stream.Field{{Name: "n", Type: stream.Int64}, {Name: "s", Type: stream.String}}
	for _, tc := range []struct {
		text string
		want string // generic result, "error" if refused
	}{
		{`{"s":"x","n":1,"matched":true}`, "error"},
		{`{ "n":1, "s":"x", "matched":false }`, `[1 x] false`},
		{`{"n":1,"s":"x","matched":true}trailing`, `[1 x] true`},
		{`{"n":1,"s":"x","matched":null}`, `[1 x] false`},
		{`{"n":01,"s":"x","matched":true}`, "error"},
		{`{"n":1.0,"s":"x","matched":true}`, "error"},
		{`{"n":1,"s":"\q","matched":true}`, "error"},
		{"{\"n\":1,\"s\":\"\x01\",\"matched\":true}", "error"},
		{`{"n":1,"s":"x"}`, "error"},
		{"{\"n\":1,\"s\":\"\xff\",\"matched\":true}", "[1 \ufffd] true"},
	} {
		val := state.AppendStringValue(nil, tc.text)
		if _, _, ok := fastDecodeRow(fields, val); ok {
			t.Errorf("%s: fast path accepted", tc.text)
		}
		r, m, err := decodeRow(fields, true, val)
		got := fmt.Sprint(boxed(r), " ", m)
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.text, got, tc.want)
		}
	}
}

// TestFastNamesRefused: sides whose names the in-place comparison does
// not take (a repeated name, a quote, a control byte) are refused by
// fastNames, and decodeRow then gives the generic result: each column's
// own value (the generic decoder's map read a repeated name's last value
// into both columns).
func TestFastNamesRefused(t *testing.T) {
	for _, fields := range [][]stream.Field{
		{{Name: "a", Type: stream.Int64}, {Name: "a", Type: stream.Int64}},
		{{Name: "q\"", Type: stream.Int64}, {Name: "b", Type: stream.Int64}},
		{{Name: "\x01", Type: stream.Int64}},
	} {
		if fastNames(fields) {
			t.Errorf("%v: fastNames accepted", fields)
		}
		val := encodeRowV1(fields, make(row, len(fields)), true)
		want, wm, werr := decodeRowJSON(fields, val)
		got, gm, err := decodeRow(fields, fastNames(fields), val)
		if fmt.Sprint(got, gm, err) != fmt.Sprint(want, wm, werr) {
			t.Errorf("%v: decodeRow %v %v %v, generic %v %v %v", fields, got, gm, err, want, wm, werr)
		}
	}
	dup := []stream.Field{{Name: "a", Type: stream.Int64}, {Name: "a", Type: stream.Int64}}
	for _, val := range [][]byte{encodeRowV1(dup, vals(1, 2), false), encodeRow(nil, dup, vals(1, 2), false)} {
		if r, _, err := decodeRow(dup, fastNames(dup), val); err != nil || !sameRow(r, vals(1, 2)) {
			t.Fatalf("repeated name: %v %v, want [1 2]", r, err)
		}
	}
}

// fuzzSchemas are the sides FuzzDecodeRow decodes by.
var fuzzSchemas = [][]stream.Field{
	{{Name: "n", Type: stream.Int64}, {Name: "f", Type: stream.Float64}, {Name: "s", Type: stream.String}},
	{{Name: "s", Type: stream.String}},
	{{Name: "f", Type: stream.Float64}, {Name: "ts", Type: stream.Timestamp}},
	{},
}

// FuzzDecodeRow: on any text the fast decoders either fall back or read
// exactly what the encoding/json decoders read; they never accept a text
// the generic decoder refuses. decodeRow and decodeCount, which read
// format 2's binary values too, never panic, and what they accept writes
// back (format 2) to a value they read as the same row or count.
func FuzzDecodeRow(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		fields := fuzzSchemas[i%len(fuzzSchemas)]
		f.Add(uint8(i%len(fuzzSchemas)), encodeRowV1(fields, randRow(rng, fields), i%2 == 0))
		f.Add(uint8(i%len(fuzzSchemas)), encodeRow(nil, fields, randRow(rng, fields), i%2 == 0))
	}
	f.Add(uint8(0), encodeCountV1(7))
	f.Add(uint8(0), encodeCount(7))
	f.Fuzz(func(t *testing.T, schema uint8, val []byte) {
		fields := fuzzSchemas[int(schema)%len(fuzzSchemas)]
		for _, v := range [][]byte{val, state.AppendStringValue(nil, string(val))} {
			if got, gm, ok := fastDecodeRow(fields, v); ok {
				want, wm, err := decodeRowJSON(fields, v)
				if err != nil || !sameRow(got, want) || gm != wm {
					t.Fatalf("%q: fast %#v %v, generic %#v %v %v", v, got, gm, want, wm, err)
				}
			}
			if got, ok := fastDecodeCount(v); ok {
				if want, err := decodeCountJSON(v); err != nil || got != want {
					t.Fatalf("%q: fast count %d, generic %d %v", v, got, want, err)
				}
			}
			if got, m, err := decodeRow(fields, fastNames(fields), v); err == nil {
				again, am, err := decodeRow(fields, false, encodeRow(nil, fields, got, m))
				if err != nil || !sameRow(got, again) || am != m {
					t.Fatalf("%q: decodeRow %#v %v, rewritten %#v %v %v", v, got, m, again, am, err)
				}
			}
			if n, err := decodeCount(v); err == nil {
				if again, err := decodeCount(encodeCount(n)); err != nil || again != n {
					t.Fatalf("%q: decodeCount %d, rewritten %d %v", v, n, again, err)
				}
			}
		}
	})
}

// BenchmarkDecodeRow decodes a blocks-shaped row: format 1 by the generic
// decoder ("json") and by decodeRow ("fast"), and format 2 ("binary").
func BenchmarkDecodeRow(b *testing.B) {
	fields := []stream.Field{
		{Name: "number", Type: stream.Int64}, {Name: "hash", Type: stream.String},
		{Name: "parent_hash", Type: stream.String}, {Name: "timestamp", Type: stream.Timestamp},
		{Name: "gas_used", Type: stream.Int64}, {Name: "base_fee", Type: stream.Float64},
		{Name: "miner", Type: stream.String}, {Name: "tx_count", Type: stream.Int32},
	}
	r := vals(int64(19000000), "0x"+strings.Repeat("ab", 32), "0x"+strings.Repeat("cd", 32), int64(1700000000000000),
		int64(12345678), 1.5e10, "0x"+strings.Repeat("ef", 20), int64(150))
	v1, v2 := encodeRowV1(fields, r, false), encodeRow(nil, fields, r, false)
	fast := fastNames(fields)
	for _, c := range []struct {
		name string
		val  []byte
		dec  func([]stream.Field, []byte) (row, bool, error)
	}{{"json", v1, decodeRowJSON}, {"fast", v1, func(f []stream.Field, v []byte) (row, bool, error) { return decodeRow(f, fast, v) }},
		{"binary", v2, func(f []stream.Field, v []byte) (row, bool, error) { return decodeRow(f, fast, v) }}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.dec(fields, c.val); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// boxed renders a row's values as Go values (nil for a null) for messages:
// a value without bytes as an integer (an empty string too).
func boxed(r row) []any {
	if r == nil {
		return nil
	}
	out := make([]any, len(r))
	for i, v := range r {
		switch {
		case v.null():
		case v.p != nil:
			out[i] = v.s()
		default:
			out[i] = v.i()
		}
	}
	return out
}
