package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// gatherChunk is a chunk with a column of each storage (int64, float64,
// string, binary, decimal, array<int64> with null elements, boolean), some
// columns with nulls in some chunks only, and signs when signed.
func gatherChunk(r *rand.Rand, n int, signed bool) *stream.Batch {
	dec, arr := stream.DecimalOf(20, 2), stream.ArrayOf(stream.Int64)
	b := &stream.Batch{Len: n}
	for _, c := range []struct {
		name string
		typ  stream.Type
	}{{"i", stream.Int64}, {"f", stream.Float64}, {"s", stream.String}, {"bin", stream.Binary},
		{"d", dec}, {"a", arr}, {"ok", stream.Boolean}} {
		col := stream.MakeColumn(c.name, c.typ, 0, 0)
		nulls := r.IntN(2) == 0
		if nulls {
			col.Valid = []bool{}
		}
		for range n {
			switch c.typ.Storage() {
			case stream.Float64:
				col.Float64s = append(col.Float64s, r.Float64())
			case stream.String:
				col.Strings = append(col.Strings, fmt.Sprint("v", r.IntN(50)))
			case stream.Decimal:
				col.Decimals = append(col.Decimals, stream.Dec128Of(r.Int64N(1e12)-5e11))
			case stream.Array:
				for range r.IntN(4) {
					col.Elems.Int64s = append(col.Elems.Int64s, r.Int64N(9))
					if r.IntN(5) == 0 && col.Elems.Valid == nil {
						col.Elems.Valid = make([]bool, len(col.Elems.Int64s)-1, len(col.Elems.Int64s))
						for k := range col.Elems.Valid {
							col.Elems.Valid[k] = true
						}
					}
					if col.Elems.Valid != nil {
						col.Elems.Valid = append(col.Elems.Valid, r.IntN(5) != 0)
					}
				}
				col.Offsets = append(col.Offsets, int32(len(col.Elems.Int64s)))
			default:
				col.Int64s = append(col.Int64s, r.Int64N(2))
			}
			if nulls {
				valid := r.IntN(4) != 0
				if !valid && c.typ.Kind() == stream.Array {
					// A null array holds no elements.
					for len(col.Elems.Int64s) > int(col.Offsets[len(col.Offsets)-2]) {
						col.Elems.Int64s = col.Elems.Int64s[:len(col.Elems.Int64s)-1]
						if col.Elems.Valid != nil {
							col.Elems.Valid = col.Elems.Valid[:len(col.Elems.Valid)-1]
						}
					}
					col.Offsets[len(col.Offsets)-1] = int32(len(col.Elems.Int64s))
				}
				col.Valid = append(col.Valid, valid)
			}
		}
		b.Columns = append(b.Columns, col)
	}
	if signed {
		for range n {
			b.Signs = append(b.Signs, int8(1-2*r.IntN(2)))
		}
	}
	return b
}

// gatherRows is the oracle: the row-at-a-time gather appendProjected did
// before it appended ranges into presized columns.
func gatherRows(out, in *stream.Batch, sel []string) {
	if in.Len == 0 {
		return
	}
	if len(out.Columns) == 0 {
		for _, name := range sel {
			out.Columns = append(out.Columns, stream.Column{Name: name, Type: in.Column(name).Type})
		}
	}
	for i := range out.Columns {
		dst := &out.Columns[i]
		src := in.Column(dst.Name)
		if dst.Valid == nil && src.Valid != nil {
			dst.Valid = make([]bool, out.Len)
			for j := range dst.Valid {
				dst.Valid[j] = true
			}
		}
		for r := 0; r < in.Len; r++ {
			dst.Append(src, r)
		}
	}
	if in.Signs != nil || out.Signs != nil {
		for len(out.Signs) < out.Len {
			out.Signs = append(out.Signs, 1)
		}
		for r := 0; r < in.Len; r++ {
			out.Signs = append(out.Signs, in.Sign(r))
		}
	}
	out.Len += in.Len
}

// TestGatherAgainstRows: the read path's gather of a batch's chunks (every
// storage, nulls in some chunks only, empty chunks, signs in some) equals
// the row-at-a-time oracle's, value for value and in which columns carry
// Valid, whatever room the last batch's size reserved.
func TestGatherAgainstRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var rp readPath
	rp.sel = []string{"a", "s", "d", "i", "ok", "bin", "f"}
	for iter := range 200 {
		want := &stream.Batch{}
		for range r.IntN(6) {
			in := gatherChunk(r, r.IntN(3)*r.IntN(12), r.IntN(3) == 0)
			if err := in.Validate(); err != nil {
				t.Fatal(err)
			}
			gatherRows(want, in, rp.sel)
			if err := rp.collect(in); err != nil {
				t.Fatal(err)
			}
		}
		got := rp.take()
		if want.Len == 0 {
			if got.Len != 0 || len(got.Columns) != 0 {
				t.Fatalf("iteration %d: gathered %+v from no rows", iter, got)
			}
			continue
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d: gathered\n%+v\nwant\n%+v", iter, got, want)
		}
	}
}

// TestGatherPresized: a batch no larger than the last is gathered into
// columns made once with the last batch's room: no column regrows while
// its chunks arrive (the row-at-a-time gather doubled each column about
// log2(rows) times).
func TestGatherPresized(t *testing.T) {
	chunks := gatherBenchChunks(20, 640)
	var rp readPath
	rp.sel = []string{"number", "miner", "gas_used"}
	for batch := range 3 {
		for _, c := range chunks {
			if err := rp.collect(c); err != nil {
				t.Fatal(err)
			}
		}
		out := rp.take()
		if batch == 0 {
			continue
		}
		if c := out.Columns[0]; cap(c.Int64s) != out.Len {
			t.Fatalf("batch %d: %d rows in a column of capacity %d, want the last batch's %d", batch, out.Len, cap(c.Int64s), out.Len)
		}
		if c := out.Columns[1]; cap(c.Strings) != out.Len {
			t.Fatalf("batch %d: %d rows in a string column of capacity %d", batch, out.Len, cap(c.Strings))
		}
	}
}

// gatherBenchChunks are n chunks of rows blocks (number, miner, gas_used),
// 40% of each dropped as a WHERE would.
func gatherBenchChunks(n, rows int) []*stream.Batch {
	r := rand.New(rand.NewPCG(1, 1))
	var out []*stream.Batch
	for k := range n {
		in := &stream.Batch{Len: rows, Columns: []stream.Column{
			stream.MakeColumn("number", stream.Int64, rows, rows), stream.MakeColumn("miner", stream.String, rows, rows),
			stream.MakeColumn("gas_used", stream.Int64, rows, rows)}}
		keep := make([]bool, rows)
		for i := range rows {
			in.Columns[0].Int64s[i] = int64(k*rows + i)
			in.Columns[1].Strings[i] = fmt.Sprint("0xminer", r.IntN(40))
			in.Columns[2].Int64s[i] = r.Int64N(3e7)
			keep[i] = r.IntN(10) >= 4
		}
		out = append(out, in.Filter(keep))
	}
	return out
}

// BenchmarkGather: the read path gathering a batch's 100 filtered chunks
// of 6,400 rows (3 columns int64/string/int64, 40% dropped) into the one
// batch a stateless query hands its sink, batch after batch.
// Run: go test -run XXX -bench Gather -benchmem ./engine
func BenchmarkGather(b *testing.B) {
	chunks := gatherBenchChunks(100, 6400)
	var rp readPath
	rp.sel = []string{"number", "miner", "gas_used"}
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range chunks {
			if err := rp.collect(c); err != nil {
				b.Fatal(err)
			}
		}
		rp.take()
	}
}
