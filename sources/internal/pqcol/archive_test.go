package pqcol

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"

	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/stream"
)

// sameFileSchema covers every timestamp unit (UTC and NTZ), INT96,
// decimals of each physical type and plain columns, all optional.
var sameFileSchema = parquet.NewSchema("t", parquet.Group{
	"ts_ms":      parquet.Optional(parquet.Timestamp(parquet.Millisecond)),
	"ts_us":      parquet.Optional(parquet.Timestamp(parquet.Microsecond)),
	"ts_ns":      parquet.Optional(parquet.Timestamp(parquet.Nanosecond)),
	"ntz_ms":     parquet.Optional(parquet.TimestampAdjusted(parquet.Millisecond, false)),
	"ntz_ns":     parquet.Optional(parquet.TimestampAdjusted(parquet.Nanosecond, false)),
	"ts96":       parquet.Optional(parquet.Leaf(parquet.Int96Type)),
	"dec32":      parquet.Optional(parquet.Decimal(2, 9, parquet.Int32Type)),
	"dec64":      parquet.Optional(parquet.Decimal(3, 18, parquet.Int64Type)),
	"decbin":     parquet.Optional(parquet.Decimal(4, 30, parquet.FixedLenByteArrayType(13))),
	"n":          parquet.Optional(parquet.Int(64)),
	"small":      parquet.Optional(parquet.Int(32)),
	"x":          parquet.Optional(parquet.Leaf(parquet.DoubleType)),
	"s":          parquet.Optional(parquet.String()),
	"plain_text": parquet.Optional(parquet.Leaf(parquet.ByteArrayType)),
	"hash":       parquet.Optional(parquet.Leaf(parquet.FixedLenByteArrayType(4))),
})

// want is a written value and the engine value the rules table makes of
// it, computed here independently of both decoders.
type want struct {
	null bool
	i    int64
	f    float64
	s    string
}

// TestFileAndArchiveDecodeAlike writes one file and decodes it as the file
// source does (Decode, a Spark schema's columns) and as the archive source
// does (columnar.Open with a top-level Path per column, as s3archive's
// fieldsOf builds them): the two agree value by value and with the values
// written. Decimals the file source refuses (Spark reads them as
// DecimalType, which the engine lacks); the archive reads them, and the
// test pins that difference.
func TestFileAndArchiveDecodeAlike(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type col struct {
		name string
		typ  stream.Type
		gen  func() (parquet.Value, want)
	}
	micro := func(x int64) want { return want{i: x} }
	floorDiv := func(x, d int64) int64 { // independent of columnar's
		return new(big.Int).Div(big.NewInt(x), big.NewInt(d)).Int64() // Euclidean: floor for d > 0
	}
	cols := []col{
		{"ts_ms", stream.Timestamp, func() (parquet.Value, want) {
			x := r.Int64N(4e12) - 2e12
			return parquet.Int64Value(x), micro(x * 1000)
		}},
		{"ts_us", stream.Timestamp, func() (parquet.Value, want) { x := r.Int64N(4e15) - 2e15; return parquet.Int64Value(x), micro(x) }},
		{"ts_ns", stream.Timestamp, func() (parquet.Value, want) {
			x := r.Int64N(4e18) - 2e18
			return parquet.Int64Value(x), micro(floorDiv(x, 1000))
		}},
		{"ntz_ms", stream.Timestamp, func() (parquet.Value, want) {
			x := r.Int64N(4e12) - 2e12
			return parquet.Int64Value(x), micro(x * 1000)
		}},
		{"ntz_ns", stream.Timestamp, func() (parquet.Value, want) {
			x := r.Int64N(4e18) - 2e18
			return parquet.Int64Value(x), micro(floorDiv(x, 1000))
		}},
		{"ts96", stream.Timestamp, func() (parquet.Value, want) {
			day := 2440588 + r.Int64N(40000) - 20000 // Julian day, around 1970
			nanos := r.Int64N(86_400_000_000_000)
			v := deprecated.Int96{uint32(nanos), uint32(nanos >> 32), uint32(day)}
			return parquet.Int96Value(v), micro((day-2440588)*86_400_000_000 + nanos/1000)
		}},
		{"n", stream.Int64, func() (parquet.Value, want) { x := r.Int64() - r.Int64(); return parquet.Int64Value(x), want{i: x} }},
		{"small", stream.Int64, func() (parquet.Value, want) { x := int32(r.Uint32()); return parquet.Int32Value(x), want{i: int64(x)} }},
		{"x", stream.Float64, func() (parquet.Value, want) { x := r.NormFloat64(); return parquet.DoubleValue(x), want{f: x} }},
		{"s", stream.String, func() (parquet.Value, want) {
			s := string(rune('a' + r.IntN(26)))
			return parquet.ByteArrayValue([]byte(s)), want{s: s}
		}},
		{"plain_text", stream.String, func() (parquet.Value, want) {
			s := string(rune('A' + r.IntN(26)))
			return parquet.ByteArrayValue([]byte(s)), want{s: s}
		}},
		// An unannotated FIXED_LEN_BYTE_ARRAY (a hash) read as a string is
		// 0x-hex, as the archive reads its hashes; pqcol's own decoder gave
		// the raw bytes.
		{"hash", stream.String, func() (parquet.Value, want) {
			b := []byte{byte(r.Uint32()), byte(r.Uint32()), 0, 0xff}
			return parquet.FixedLenByteArrayValue(b), want{s: fmt.Sprintf("0x%x", b)}
		}},
	}
	decimals := []col{
		{"dec32", stream.Float64, func() (parquet.Value, want) {
			x := int32(r.IntN(2e9) - 1e9)
			return parquet.Int32Value(x), want{f: float64(x) / 1e2}
		}},
		{"dec64", stream.Float64, func() (parquet.Value, want) {
			x := r.Int64N(1e17) - 5e16
			return parquet.Int64Value(x), want{f: float64(x) / 1e3}
		}},
		{"decbin", stream.Float64, func() (parquet.Value, want) {
			x := r.Int64N(2e15) - 1e15
			b := make([]byte, 13) // two's complement, sign-extended
			for i, u := 12, uint64(x); i >= 0; i-- {
				b[i] = byte(u)
				u = uint64(int64(u) >> 8)
			}
			return parquet.FixedLenByteArrayValue(b), want{f: float64(x) / 1e4}
		}},
	}
	all := append(append([]col{}, cols...), decimals...)
	const nRows = 2500
	wants := make([][]want, len(all))
	rows := make([]parquet.Row, nRows)
	for i := range rows {
		rows[i] = make(parquet.Row, len(all))
	}
	for k, c := range all {
		lc, ok := sameFileSchema.Lookup(c.name)
		if !ok {
			t.Fatalf("schema lacks %s", c.name)
		}
		wants[k] = make([]want, nRows)
		for i := range rows {
			if r.IntN(4) == 0 {
				rows[i][lc.ColumnIndex] = parquet.NullValue().Level(0, 0, lc.ColumnIndex)
				wants[k][i] = want{null: true}
				continue
			}
			v, w := c.gen()
			rows[i][lc.ColumnIndex] = v.Level(0, 1, lc.ColumnIndex)
			wants[k][i] = w
		}
	}
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, sameFileSchema, parquet.MaxRowsPerRowGroup(700), parquet.PageBufferSize(2048))
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()

	// The file source.
	var fileCols []Column
	for _, c := range cols {
		fileCols = append(fileCols, Column{Name: c.name, Type: c.typ})
	}
	fileBatches, err := Decode(bytes.NewReader(data), int64(len(data)), fileCols)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range decimals {
		for _, typ := range []stream.Type{stream.Float64, stream.Int64} {
			if _, err := Decode(bytes.NewReader(data), int64(len(data)), []Column{{c.name, typ}}); !errors.Is(err, ErrTypeMismatch) {
				t.Errorf("file source read decimal %s as %v: %v", c.name, typ, err)
			}
		}
	}
	// The archive source.
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var fields []columnar.Field
	for _, c := range all {
		fields = append(fields, columnar.Field{Name: c.name, Path: []string{c.name}, Type: c.typ})
	}
	dec, err := columnar.Open(pf, fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fileBatches) != len(pf.RowGroups()) || len(fileBatches) < 3 {
		t.Fatalf("file source: %d batches, archive: %d row groups", len(fileBatches), len(pf.RowGroups()))
	}
	check := func(src string, k, row int, c *stream.Column, i int) {
		t.Helper()
		w := wants[k][row]
		ok := c.IsNull(i) == w.null
		if ok && !w.null {
			switch c.Type {
			case stream.Float64:
				ok = c.Float64s[i] == w.f
			case stream.String:
				ok = c.Strings[i] == w.s
			default:
				ok = c.Int64s[i] == w.i
			}
		}
		if !ok {
			t.Fatalf("%s: column %s row %d: decoded %s, want %+v", src, all[k].name, row, show(c, i), w)
		}
	}
	row := 0
	for g, fb := range fileBatches {
		ab, err := dec.DecodeRowGroup(g)
		if err != nil {
			t.Fatal(err)
		}
		if err := fb.Validate(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < fb.Len; i++ {
			for k := range all {
				if k < len(cols) {
					check("file source", k, row+i, &fb.Columns[k], i)
				}
				check("archive source", k, row+i, &ab.Batch.Columns[k], i)
			}
		}
		row += fb.Len
	}
	if row != nRows {
		t.Fatalf("decoded %d rows, wrote %d", row, nRows)
	}
}

// show is row i of c, for a failure message.
func show(c *stream.Column, i int) string {
	switch {
	case c.IsNull(i):
		return "null"
	case c.Type == stream.Float64:
		return fmt.Sprint(c.Float64s[i])
	case c.Type == stream.String:
		return fmt.Sprintf("%q", c.Strings[i])
	}
	return fmt.Sprint(c.Int64s[i])
}
