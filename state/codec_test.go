package state

import (
	"bytes"
	"cmp"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

var mixedSchema = []Field{{Name: "a", Type: stream.Int64}, {Name: "b", Type: stream.Float64}, {Name: "c", Type: stream.String}, {Name: "d", Type: stream.Timestamp}}

func randRow(rng *rand.Rand) []any {
	ints := []int64{math.MinInt64, -1, 0, 1, math.MaxInt64, rng.Int64() - math.MaxInt64/2, int64(rng.IntN(5))}
	floats := []float64{math.Inf(-1), -1.5, math.Copysign(0, -1), 0, 1e-300, 2.5, math.Inf(1), rng.NormFloat64(), float64(rng.IntN(3))}
	strs := []string{"", "\x00", "\x00\x00", "\x00\x01", "a", "a\x00", "a\x00b", "ab", "\xff", "b", string(rune('a' + rng.IntN(3)))}
	return []any{ints[rng.IntN(len(ints))], floats[rng.IntN(len(floats))], strs[rng.IntN(len(strs))], ints[rng.IntN(len(ints))]}
}

func cmpRow(x, y []any) int {
	if c := cmp.Compare(x[0].(int64), y[0].(int64)); c != 0 {
		return c
	}
	fx, fy := x[1].(float64), y[1].(float64)
	if c := cmp.Compare(fx, fy); c != 0 {
		return c
	}
	if fx == 0 && fy == 0 && math.Signbit(fx) != math.Signbit(fy) {
		if math.Signbit(fx) {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(x[2].(string), y[2].(string)); c != 0 {
		return c
	}
	return cmp.Compare(x[3].(int64), y[3].(int64))
}

// TestKeyOrderPreserving checks the codec against a field-wise comparison.
func TestKeyOrderPreserving(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		x, y := randRow(rng), randRow(rng)
		ex, ey := EncodeKeyRow(nil, mixedSchema, x...), EncodeKeyRow(nil, mixedSchema, y...)
		if got, want := bytes.Compare(ex, ey), cmpRow(x, y); got != want {
			t.Fatalf("%v vs %v: encoded compare %d, field-wise %d", x, y, got, want)
		}
		dx, err := DecodeKey(mixedSchema, ex)
		if err != nil || cmpRow(dx, x) != 0 {
			t.Fatalf("round trip %v -> %v (%v)", x, dx, err)
		}
		vx := EncodeValueRow(nil, mixedSchema, x...)
		dv, err := DecodeValue(mixedSchema, vx)
		if err != nil || cmpRow(dv, x) != 0 {
			t.Fatalf("value round trip %v -> %v (%v)", x, dv, err)
		}
	}
}

// TestNullableKeyOrder: a nullable Int64 or Timestamp key field encodes
// null before every value (NULLS FIRST) and keeps the order of values; its
// null round-trips as nil; a field that is not nullable keeps the 8-byte
// encoding of schemas recorded before nullable fields existed.
func TestNullableKeyOrder(t *testing.T) {
	schema := []Field{{Name: "n", Type: stream.Int64, Nullable: true}, {Name: "t", Type: stream.Timestamp, Nullable: true}, {Name: "s", Type: stream.String}}
	vals := []any{nil, int64(math.MinInt64), int64(-1), int64(0), int64(1), int64(math.MaxInt64)}
	cmpVal := func(x, y any) int {
		switch {
		case x == nil && y == nil:
			return 0
		case x == nil:
			return -1
		case y == nil:
			return 1
		}
		return cmp.Compare(x.(int64), y.(int64))
	}
	for _, a := range vals {
		for _, b := range vals {
			for _, c := range vals {
				x, y := []any{a, b, "k"}, []any{c, a, "k"}
				want := cmpVal(a, c)
				if want == 0 {
					want = cmpVal(b, a)
				}
				if got := bytes.Compare(EncodeKeyRow(nil, schema, x...), EncodeKeyRow(nil, schema, y...)); got != want {
					t.Fatalf("%v vs %v: encoded compare %d, want %d", x, y, got, want)
				}
				d, err := DecodeKey(schema, EncodeKeyRow(nil, schema, x...))
				if err != nil || cmpVal(d[0], a) != 0 || cmpVal(d[1], b) != 0 || d[2] != "k" {
					t.Fatalf("round trip %v -> %v (%v)", x, d, err)
				}
			}
		}
	}
	if got := EncodeKeyRow(nil, mixedSchema[:1], int64(5)); !bytes.Equal(got, AppendInt64Key(nil, 5)) {
		t.Fatalf("a field that is not nullable encodes %x", got)
	}
	if _, err := DecodeKey(schema[:1], []byte{0x02}); err == nil {
		t.Fatal("a bad null marker decoded")
	}
	bad := Schema{OperatorName: "x", Key: []Field{{Name: "f", Type: stream.Binary, Nullable: true}}}
	if err := bad.validate(); err == nil {
		t.Fatal("a nullable binary key validated")
	}
	if s := (Schema{OperatorName: "x", Key: schema[:1]}).String(); s != "x key(n int64 nullable) value() spec()" {
		t.Fatalf("String() = %q", s)
	}
}

// TestPartitionOfStable pins the key -> partition function: changing it
// would scatter every existing checkpoint's keys.
func TestPartitionOfStable(t *testing.T) {
	for _, c := range []struct {
		key  string
		n    int
		want int
	}{
		{"", 200, int(uint64(14695981039346656037) % 200)},
		{"a", 1 << 30, int(uint64(0xaf63dc4c8601ec8c) % (1 << 30))},
		{"foobar", 1 << 30, int(uint64(0x85944171f73967e8) % (1 << 30))},
	} {
		if got := PartitionOf([]byte(c.key), c.n); got != c.want {
			t.Errorf("PartitionOf(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
	// Spread: 3,200 reference-like keys over 200 partitions leave none empty
	// by more than chance would.
	counts := make([]int, 200)
	for i := range 3200 {
		counts[PartitionOf(testKey(i), 200)]++
	}
	for p, c := range counts {
		if c > 45 {
			t.Errorf("partition %d holds %d of 3200 keys", p, c)
		}
	}
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(EncodeKeyRow(nil, mixedSchema, int64(5), 1.5, "a\x00b", int64(-3)))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := DecodeKey(mixedSchema, b)
		if err != nil {
			return
		}
		if re := EncodeKeyRow(nil, mixedSchema, vals...); !bytes.Equal(re, b) {
			t.Fatalf("decode/encode changed %x into %x", b, re)
		}
	})
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(EncodeValueRow(nil, mixedSchema, int64(5), 1.5, "a\x00b", int64(-3)))
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := DecodeValue(mixedSchema, b)
		if err != nil {
			return
		}
		if re := EncodeValueRow(nil, mixedSchema, vals...); !bytes.Equal(re, b) && !math.IsNaN(vals[1].(float64)) {
			// Varints have one canonical form only when minimal; accept
			// non-minimal input that decodes.
			if v2, err := DecodeValue(mixedSchema, re); err != nil || cmpRow(v2, vals) != 0 {
				t.Fatalf("decode/encode changed %x into %x", b, re)
			}
		}
	})
}

// sampleDataFile returns a small valid delta file.
func sampleDataFile(t testing.TB) []byte {
	var b bytes.Buffer
	dw, err := newDataWriter(&b, kindDelta, 7, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	type kv struct {
		p    int
		k, v []byte
	}
	var rs []kv
	for i := range 5 {
		k := testKey(i)
		rs = append(rs, kv{PartitionOf(k, 4), k, testVal(int64(i))})
	}
	for p := range 4 {
		var ks []kv
		for _, r := range rs {
			if r.p == p {
				ks = append(ks, r)
			}
		}
		for i := range ks {
			for j := i + 1; j < len(ks); j++ {
				if bytes.Compare(ks[j].k, ks[i].k) < 0 {
					ks[i], ks[j] = ks[j], ks[i]
				}
			}
		}
		for i, r := range ks {
			kind := byte(recPut)
			if i%2 == 1 {
				kind = recDelete
			}
			if err := dw.add(kind, r.p, r.k, r.v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := dw.finish(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func FuzzDecodeData(f *testing.F) {
	f.Add(sampleDataFile(f))
	f.Add([]byte("ESSD"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hd, _, err := decodeData(bytes.NewReader(b), nil)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		var out bytes.Buffer
		dw, err := newDataWriter(&out, hd.Kind, hd.Version, hd.Attempt, hd.Partitions)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = decodeData(bytes.NewReader(b), func(_ dataHeader, r record) error {
			return dw.add(r.Kind, r.Partition, r.Key, r.Val)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := dw.finish(); err != nil {
			t.Fatal(err)
		}
		// Chunking may differ only if the input chunked differently; the
		// records must match.
		var a, c []record
		collect := func(dst *[]record) func(dataHeader, record) error {
			return func(_ dataHeader, r record) error {
				*dst = append(*dst, record{r.Kind, r.Partition, bytes.Clone(r.Key), bytes.Clone(r.Val)})
				return nil
			}
		}
		_, _, _ = decodeData(bytes.NewReader(b), collect(&a))
		if _, _, err := decodeData(bytes.NewReader(out.Bytes()), collect(&c)); err != nil || len(a) != len(c) {
			t.Fatalf("re-encoded file: %v, %d vs %d records", err, len(a), len(c))
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	b := encodeMeta(&versionMeta{
		FormatVersion: metaFormatVersion, StoreID: "x", Version: 3, Attempt: 1, Kind: kindNameDelta,
		Data: dataFileName(3, 1, kindNameDelta), DataSize: 100, DataRecords: 2, Base: &versionRef{2, 0},
		ChainLength: 1, ChainBytes: 100, Partitions: 2, Rows: 5, PartitionRows: []int64{2, 3}, Schema: testSchema,
		PartitionKeys: []*keyBounds{{Min: []byte{1}, Max: []byte{1, 2}}, nil},
	})
	if _, err := decodeMeta(b); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(encodeMeta(&versionMeta{
		FormatVersion: 1, StoreID: "x", Version: 3, Attempt: 1, Kind: kindNameSnapshot,
		Data: dataFileName(3, 1, kindNameSnapshot), DataSize: 100, DataRecords: 2,
		Partitions: 2, Rows: 5, PartitionRows: []int64{2, 3}, Schema: testSchema,
	}))
	f.Add([]byte(metaHeader + "\n{}\ncrc32c:00000000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		if _, err := decodeMeta(encodeMeta(m)); err != nil {
			t.Fatalf("re-encoded metadata does not decode: %v", err)
		}
	})
}

// TestAppendStringKeyBytewise checks AppendStringKey's run-at-a-time copy
// against the format's definition applied one byte at a time (escape each
// 0x00 as 0x00 0xFF, end with 0x00 0x01), on strings dense in escapes.
func TestAppendStringKeyBytewise(t *testing.T) {
	bytewise := func(dst []byte, v string) []byte {
		for i := 0; i < len(v); i++ {
			if v[i] == 0x00 {
				dst = append(dst, 0x00, 0xFF)
				continue
			}
			dst = append(dst, v[i])
		}
		return append(dst, 0x00, 0x01)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{0x00, 0x01, 0xFF, 'a', '0', 'x'}
	for range 20000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		prefix := []byte{byte(rng.IntN(256))}
		if got, want := AppendStringKey(bytes.Clone(prefix), string(b)), bytewise(bytes.Clone(prefix), string(b)); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %x, want %x", b, got, want)
		}
	}
}
