package columnar

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// TestPoolRecycles decodes a file's row groups into slices a Pool recycled
// from batches full of other values, and checks every column against the
// same file decoded without a pool: values, validity and a null's slot
// (zero, as a new column holds), a column the file lacks included.
func TestPoolRecycles(t *testing.T) {
	type row struct {
		TS    int64   `parquet:"ts,timestamp(microsecond)"`
		Gas   *int64  `parquet:"gas,optional"`
		Miner string  `parquet:"miner,dict"`
		Note  *string `parquet:"note,optional"`
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf, parquet.PageBufferSize(1024))
	i := 0
	for _, n := range []int{700, 300, 1500, 40} { // row groups that grow and shrink
		rows := make([]row, n)
		for j := range rows {
			rows[j] = row{TS: int64(i) * 12e6, Miner: fmt.Sprintf("0x%02x", i%37)}
			if i%3 != 0 {
				g := int64(i * 21)
				rows[j].Gas = &g
			}
			if i%5 == 0 {
				s := fmt.Sprint("note ", i)
				rows[j].Note = &s
			}
			i++
		}
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fields := []Field{{Name: "ts", Type: stream.Timestamp}, {Name: "gas", Type: stream.Int64},
		{Name: "miner", Type: stream.String}, {Name: "note", Type: stream.String}, {Name: "absent", Type: stream.Int64}}
	decode := func(pool *Pool) []*stream.Batch {
		f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		dec, err := Open(f, fields, nil)
		if err != nil {
			t.Fatal(err)
		}
		dec.UsePool(pool)
		var out []*stream.Batch
		for g := range f.RowGroups() {
			// Garbage in every slot the pool may hand out.
			junk := &stream.Batch{}
			for _, fd := range fields {
				c := stream.MakeColumn(fd.Name, fd.Type, 2000, 2000)
				for r := range c.Int64s {
					c.Int64s[r] = -7
				}
				for r := range c.Strings {
					c.Strings[r] = "junk"
				}
				junk.Columns = append(junk.Columns, c)
			}
			pool.Put(junk)
			rg, err := dec.DecodeRowGroup(g)
			if err != nil {
				t.Fatal(err)
			}
			keep := &stream.Batch{Len: rg.Batch.Len}
			for _, c := range rg.Batch.Columns {
				keep.Columns = append(keep.Columns, stream.Column{Name: c.Name, Type: c.Type,
					Int64s: slices.Clone(c.Int64s), Strings: slices.Clone(c.Strings), Valid: slices.Clone(c.Valid)})
			}
			out = append(out, keep)
			pool.Put(rg.Batch)
		}
		return out
	}
	want, got := decode(nil), decode(&Pool{})
	if len(got) != len(want) || len(got) != 4 {
		t.Fatalf("decoded %d row groups with a pool, %d without, want 4", len(got), len(want))
	}
	for g := range want {
		for c := range want[g].Columns {
			w, x := want[g].Columns[c], got[g].Columns[c]
			if !slices.Equal(w.Int64s, x.Int64s) || !slices.Equal(w.Strings, x.Strings) || !slices.Equal(w.Valid, x.Valid) {
				t.Fatalf("row group %d, column %s: decoded into recycled slices differs from a new decode", g, w.Name)
			}
		}
	}
}

// TestPoolEmptyColumnTakesNothing: a column of no rows (an empty row
// group, whose batch no reader emits or puts back) leaves the pool's
// slices for the next row group.
func TestPoolEmptyColumnTakesNothing(t *testing.T) {
	p := &Pool{}
	p.Put(&stream.Batch{Columns: []stream.Column{stream.MakeColumn("a", stream.Int64, 100, 100), stream.MakeColumn("s", stream.String, 100, 100)}})
	p.column("a", stream.Int64, 0)
	p.column("s", stream.String, 0)
	if len(p.ints) != 1 || len(p.strs) != 1 {
		t.Fatalf("after columns of no rows the pool holds %d int and %d string slices, want 1 and 1", len(p.ints), len(p.strs))
	}
}
