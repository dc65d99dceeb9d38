package delta

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/parquettype"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// oldAppendValues is appendValues before its Float64 fast loop and its
// in-place general loop (issue 43): every value made by Value.Level. It is
// the reference the encoder's bytes are compared with.
func oldAppendValues(rs *rowSet, dst []parquet.Value, sc *parquettype.Scratch, c, lo, hi int) []parquet.Value {
	v := &rs.cols[c]
	def := len(rs.l.leaves[c].path)
	typ := rs.l.leaves[c].typ
	if typ.Kind() == stream.Array {
		return rs.appendListValues(dst, sc, c, lo, hi)
	}
	for i := lo; i < hi; i++ {
		switch {
		case def == 2 && rs.winNull != nil && rs.winNull[i]:
			dst = append(dst, parquet.NullValue().Level(0, 0, c))
		case v.IsNull(i):
			dst = append(dst, parquet.NullValue().Level(0, def-1, c))
		case typ == stream.Float64:
			dst = append(dst, parquet.DoubleValue(v.Float64s[i]).Level(0, def, c))
		case typ != stream.String && typ != stream.Int64 && typ != stream.Timestamp:
			dst = append(dst, sc.Value(typ, v, i).Level(0, def, c))
		case typ == stream.String:
			dst = append(dst, parquet.ByteArrayValue([]byte(v.Strings[i])).Level(0, def, c))
		default:
			dst = append(dst, parquet.Int64Value(v.Int64s[i]).Level(0, def, c))
		}
	}
	return dst
}

// checkEncodesAsOld encodes rows with encodeRows, fails unless the bytes
// are oldEncodeRows's, and with readBack reads the file back through
// readDataFile and fails unless it holds every row.
func checkEncodesAsOld(t *testing.T, l *outLayout, rows *rowSet, readBack bool) {
	t.Helper()
	var got bytes.Buffer
	if _, err := encodeRows(&got, l.pq, rows); err != nil {
		t.Fatal(err)
	}
	if want := oldEncodeRows(t, l.pq, rows); !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("encodeRows wrote %d bytes, parquet-go's column writers %d, not the same", got.Len(), len(want))
	}
	if !readBack {
		return
	}
	fs := vfs.NewMem()
	if err := writeFileFS(fs, "f.parquet", got.Bytes()); err != nil {
		t.Fatal(err)
	}
	back, err := readDataFile(fs, "f.parquet", l)
	if err != nil {
		t.Fatal(err)
	}
	if back.n != rows.n {
		t.Fatalf("read back %d rows, wrote %d", back.n, rows.n)
	}
}

// oldEncodeRows is encodeRows writing oldAppendValues' values.
func oldEncodeRows(t *testing.T, pq *parquet.Schema, rows *rowSet) []byte {
	t.Helper()
	var buf bytes.Buffer
	pw := parquet.NewWriter(&buf, dataFileOptions(pq, rows.n)...)
	cols := pw.ColumnWriters()
	var sc parquettype.Scratch
	for lo := 0; lo < rows.n; lo += 8192 {
		hi := min(lo+8192, rows.n)
		for c := range rows.cols {
			sc.Reset()
			if _, err := cols[c].WriteRowValues(oldAppendValues(rows, nil, &sc, c, lo, hi)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// everyTypeSchema has a window and a column of every type the sink
// writes: each scalar, DECIMALs of the three physical widths, and arrays.
func everyTypeSchema() stream.Schema {
	s := stream.Schema{Key: []string{KeyWindowStart, KeyWindowEnd}, Fields: []stream.Field{
		{Name: KeyWindowStart, Type: stream.Timestamp}, {Name: KeyWindowEnd, Type: stream.Timestamp}}}
	types := []stream.Type{stream.Int64, stream.Float64, stream.String, stream.Timestamp, stream.Boolean,
		stream.Int32, stream.Date, stream.Int8, stream.Int16, stream.Float32, stream.Binary, stream.TimestampNTZ,
		stream.DecimalOf(9, 2), stream.DecimalOf(18, 4), stream.DecimalOf(38, 10),
		stream.ArrayOf(stream.Int64), stream.ArrayOf(stream.String), stream.ArrayOf(stream.Float64)}
	for i, typ := range types {
		s.Fields = append(s.Fields, stream.Field{Name: fmt.Sprintf("c%d", i), Type: typ, Nullable: true})
	}
	return s
}

// fillScalar sets row r of c (a scalar column of n rows) to a random value.
func fillScalar(rng *rand.Rand, c *stream.Column, r int) {
	typ := c.Type
	switch typ.Storage() {
	case stream.Float64:
		x := []float64{0, math.Copysign(0, -1), 1.5, -2, math.NaN(), math.Inf(-1), rng.Float64() * 1e6}[rng.IntN(7)]
		if typ == stream.Float32 {
			x = float64(float32(x))
		}
		c.Float64s[r] = x
	case stream.String:
		c.Strings[r] = []string{"", "a", "é", fmt.Sprintf("0x%040x", rng.Uint64())}[rng.IntN(4)]
	case stream.Decimal:
		p := typ.Precision()
		lim := int64(math.Pow10(min(p, 18)))
		c.Decimals[r] = stream.Dec128Of(rng.Int64N(lim) - lim/2)
		if p > 18 && rng.IntN(2) == 0 {
			c.Decimals[r] = stream.Dec128{Hi: rng.Int64N(1 << 40), Lo: rng.Uint64()}
		}
	default:
		var x int64
		switch typ {
		case stream.Boolean:
			x = rng.Int64N(2)
		case stream.Int8:
			x = rng.Int64N(256) - 128
		case stream.Int16:
			x = rng.Int64N(1<<16) - 1<<15
		case stream.Int32, stream.Date:
			x = int64(int32(rng.Uint32()))
		default:
			x = rng.Int64()
		}
		c.Int64s[r] = x
	}
}

// everyTypeRows is n rows of l (everyTypeSchema's layout); with nulls,
// about one value in four is null, and one window in eight.
func everyTypeRows(rng *rand.Rand, l *outLayout, n int, nulls bool) *rowSet {
	rs := &rowSet{l: l, cols: make([]stream.Column, len(l.leaves)), n: n}
	if nulls {
		rs.winNull = make([]bool, n)
		for r := range n {
			rs.winNull[r] = rng.IntN(8) == 0
		}
	}
	for i, lf := range l.leaves {
		c := stream.MakeColumn(lf.col, lf.typ, n, n)
		if nulls {
			c.Valid = make([]bool, n)
		}
		for r := range n {
			if nulls {
				c.Valid[r] = rng.IntN(4) > 0
			}
			if lf.typ.Kind() != stream.Array {
				if c.Valid == nil || c.Valid[r] {
					fillScalar(rng, &c, r)
				}
				continue
			}
			k := 0
			if c.Valid == nil || c.Valid[r] {
				k = rng.IntN(4)
			}
			for range k {
				e := stream.MakeColumn("element", lf.typ.Elem(), 1, 1)
				fillScalar(rng, &e, 0)
				if nulls && rng.IntN(5) == 0 {
					e.Valid = []bool{false}
				}
				c.Elems.Append(&e, 0)
			}
			c.Offsets[r+1] = c.Offsets[r] + int32(k)
		}
		if lf.path[0] == windowField && nulls {
			for r := range n {
				if rs.winNull[r] {
					c.Valid[r] = false
				}
			}
		}
		rs.cols[i] = c
	}
	return rs
}

// TestEncodeRowsEveryTypeBytes checks that encodeRows writes, byte for
// byte, the file oldEncodeRows writes, for every column type, with and
// without nulls and null windows, at sizes of one and several chunks and
// pages.
func TestEncodeRowsEveryTypeBytes(t *testing.T) {
	l, err := sinkLayout(everyTypeSchema(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(45, 1))
	for _, n := range []int{1, 8191, 8193, 30_000} {
		for _, nulls := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d rows nulls=%v", n, nulls), func(t *testing.T) {
				rows := everyTypeRows(rng, l, n, nulls)
				checkEncodesAsOld(t, l, rows, true)
			})
		}
	}
}

// BenchmarkEncodeRowsEveryType measures encoding 100k rows of
// everyTypeSchema (21 leaves), without and with nulls.
func BenchmarkEncodeRowsEveryType(b *testing.B) {
	l, err := sinkLayout(everyTypeSchema(), nil, "")
	if err != nil {
		b.Fatal(err)
	}
	for _, nulls := range []bool{false, true} {
		b.Run(fmt.Sprintf("nulls=%v", nulls), func(b *testing.B) {
			rows := everyTypeRows(rand.New(rand.NewPCG(45, 2)), l, 100_000, nulls)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := encodeRows(io.Discard, l.pq, rows); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestStatsFromChunksEqualLoops checks the add action's stats taken from
// the written file's column chunk statistics (chunkStat) against those
// counted over the rows (colStat, the oracle) for every column type, with
// and without nulls, a column of nulls only, several pages, and a file's
// statistics split over several row groups.
func TestStatsFromChunksEqualLoops(t *testing.T) {
	l, err := sinkLayout(everyTypeSchema(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(46, 1))
	for _, n := range []int{1, 2, 8193, 30_000} {
		for _, nulls := range []string{"none", "some", "all"} {
			t.Run(fmt.Sprintf("%d rows nulls=%s", n, nulls), func(t *testing.T) {
				rows := everyTypeRows(rng, l, n, nulls != "none")
				if nulls == "all" {
					for c := range rows.cols {
						clear(rows.cols[c].Valid)
					}
				}
				want := rows.stats(nil)
				groups, err := encodeRows(io.Discard, l.pq, rows)
				if err != nil {
					t.Fatal(err)
				}
				if got := rows.stats(groups); got != want {
					t.Fatalf("stats from the chunks\n got %s\nwant %s", got, want)
				}
				if n < 2 {
					return
				}
				// Row groups of three files, as if rows were one file of
				// three: a first of one row, whose bounds the others widen.
				cut := rng.IntN(n-1) + 1
				var split []format.RowGroup
				for _, part := range []*rowSet{rows.slice(0, 1), rows.slice(1, cut), rows.slice(cut, n)} {
					g, err := encodeRows(io.Discard, l.pq, part)
					if err != nil {
						t.Fatal(err)
					}
					split = append(split, g...)
				}
				if got := rows.stats(split); got != want {
					t.Fatalf("stats from three row groups (cut at %d)\n got %s\nwant %s", cut, got, want)
				}
			})
		}
	}
}
