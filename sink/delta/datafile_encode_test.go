package delta

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// oracleEncode writes rows of the reference layout as the sink did before
// encodeRows built its values in place: each value made by Value.Level
// from the fixture's null bits, 8192 rows of a column at a time through
// the column writers (the row API, one row at a time, cuts its pages
// elsewhere).
func oracleEncode(t *testing.T, l *outLayout, rows []refRow) []byte {
	t.Helper()
	var buf bytes.Buffer
	pw := parquet.NewWriter(&buf, dataFileOptions(l.pq, len(rows))...)
	cols := pw.ColumnWriters()
	leaf := func(r refRow, c int) parquet.Value {
		bits := []uint8{nullWS, nullWE, nullSource, nullMiner, nullCount}
		def := 1
		if c < 2 {
			def = 2
			if r.nulls&nullWindow != 0 {
				return parquet.NullValue().Level(0, 0, c)
			}
		}
		if r.nulls&bits[c] != 0 {
			return parquet.NullValue().Level(0, def-1, c)
		}
		switch c {
		case 0:
			return parquet.Int64Value(r.WS).Level(0, def, c)
		case 1:
			return parquet.Int64Value(r.WE).Level(0, def, c)
		case 2:
			return parquet.ByteArrayValue([]byte(r.Source)).Level(0, def, c)
		case 3:
			return parquet.ByteArrayValue([]byte(r.Miner)).Level(0, def, c)
		}
		return parquet.Int64Value(r.Count).Level(0, def, c)
	}
	for lo := 0; lo < len(rows); lo += 8192 {
		hi := min(lo+8192, len(rows))
		for c := range cols {
			var vals []parquet.Value
			for _, r := range rows[lo:hi] {
				vals = append(vals, leaf(r, c))
			}
			if _, err := cols[c].WriteRowValues(vals); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEncodeRowsBytes checks that encodeRows writes, byte for byte, the
// file the Value.Level oracle writes, for columns without nulls (encodeRows' fast
// loops) and with nulls of every kind (its general loop), across several
// chunks of its column-wise writes.
func TestEncodeRowsBytes(t *testing.T) {
	l := refLayout()
	rng := rand.New(rand.NewPCG(43, 1))
	for _, tc := range []struct {
		name  string
		n     int
		nulls bool
	}{{"one row", 1, false}, {"no nulls", 20_000, false}, {"nulls", 20_000, true}} {
		t.Run(tc.name, func(t *testing.T) {
			rows := backfillRows(100, tc.n)
			if tc.nulls {
				for i := range rows {
					if rng.IntN(7) == 0 {
						rows[i].nulls = []uint8{nullWS, nullWE, nullSource, nullMiner, nullCount, nullWindow | nullWS | nullWE}[rng.IntN(6)]
					}
				}
			}
			var got bytes.Buffer
			if _, err := encodeRows(&got, l.pq, refRowSet(l, rows)); err != nil {
				t.Fatal(err)
			}
			if want := oracleEncode(t, l, rows); !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("encodeRows wrote %d bytes, the Value.Level oracle %d, not the same bytes", got.Len(), len(want))
			}
			fs := vfs.NewMem()
			if err := writeFileFS(fs, "f.parquet", got.Bytes()); err != nil {
				t.Fatal(err)
			}
			back, err := readRefFile(fs, "f.parquet")
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(rows) {
				t.Fatalf("read %d rows back, wrote %d", len(back), len(rows))
			}
			for i, r := range rows {
				// A null's value is not written.
				if r.nulls&nullWS != 0 {
					r.WS = 0
				}
				if r.nulls&nullWE != 0 {
					r.WE = 0
				}
				if r.nulls&nullSource != 0 {
					r.Source = ""
				}
				if r.nulls&nullMiner != 0 {
					r.Miner = ""
				}
				if r.nulls&nullCount != 0 {
					r.Count = 0
				}
				if back[i] != r {
					t.Fatalf("row %d read back as %+v, wrote %+v", i, back[i], r)
				}
			}
		})
	}
}

func writeFileFS(fs vfs.FS, name string, b []byte) error {
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestDataFileStatistics checks where a data file keeps its statistics:
// every column chunk has its min and max and a column index, and no data
// page header has statistics (dataFileOptions; Spark's parquet-mr writes
// none there since PARQUET-1365).
func TestDataFileStatistics(t *testing.T) {
	l := refLayout()
	var buf bytes.Buffer
	if _, err := encodeRows(&buf, l.pq, refRowSet(l, backfillRows(100, 20_000))); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata()
	if len(md.RowGroups) != 1 {
		t.Fatalf("%d row groups, want 1", len(md.RowGroups))
	}
	if got, want := len(f.ColumnIndexes()), len(md.RowGroups[0].Columns); got != want {
		t.Fatalf("%d column indexes for %d column chunks", got, want)
	}
	for i, cc := range md.RowGroups[0].Columns {
		st := cc.MetaData.Statistics
		if st.MinValue == nil || st.MaxValue == nil {
			t.Errorf("column %v: chunk statistics without min/max: %+v", cc.MetaData.PathInSchema, st)
		}
		if ci := f.ColumnIndexes()[i]; len(ci.MinValues) == 0 {
			t.Errorf("column %v: an empty column index", cc.MetaData.PathInSchema)
		}
		var h format.PageHeader
		r := new(thrift.CompactProtocol).NewReader(bytes.NewReader(buf.Bytes()[cc.MetaData.DataPageOffset:]))
		if err := thrift.NewDecoder(r).Decode(&h); err != nil {
			t.Fatalf("column %v: page header: %v", cc.MetaData.PathInSchema, err)
		}
		var ps format.Statistics
		if dp, ok := h.DataPageHeader.Get(); ok {
			ps = dp.Statistics
		} else if dp, ok := h.DataPageHeaderV2.Get(); ok {
			ps = dp.Statistics
		} else {
			t.Fatalf("column %v: the first page is %v, not a data page", cc.MetaData.PathInSchema, h.Type)
		}
		if ps.MinValue != nil || ps.MaxValue != nil || ps.Min != nil || ps.Max != nil {
			t.Errorf("column %v: the data page header has statistics %+v", cc.MetaData.PathInSchema, ps)
		}
	}
}

// TestSortedUniqueTyped checks sortedUnique's typed loop against cmpKey's
// over rows drawn from a few keys, sorted or not, with and without nulls
// (which the typed loop leaves to cmpKey's).
func TestSortedUniqueTyped(t *testing.T) {
	l := refLayout()
	rng := rand.New(rand.NewPCG(43, 2))
	typed := 0
	for range 2000 {
		rows := make([]refRow, rng.IntN(6))
		for i := range rows {
			w := int64(rng.IntN(3))
			rows[i] = refRow{WS: w, WE: w + int64(rng.IntN(2)), Source: []string{"a", "b"}[rng.IntN(2)],
				Miner: []string{"", "m", "mm", "n"}[rng.IntN(4)], Count: 1}
			if rng.IntN(20) == 0 {
				rows[i].nulls = nullMiner
			}
		}
		if rng.IntN(2) == 0 {
			rs := refRowSet(l, rows)
			perm := make([]int, len(rows))
			for i := range perm {
				perm[i] = i
			}
			slices.SortFunc(perm, func(a, b int) int { return cmpKey(rs, a, rs, b) })
			sorted := make([]refRow, len(rows))
			for i, p := range perm {
				sorted[i] = rows[p]
			}
			rows = sorted
		}
		rs := refRowSet(l, rows)
		want := true
		for i := 1; i < rs.n; i++ {
			if cmpKey(rs, i-1, rs, i) >= 0 {
				want = false
			}
		}
		if _, ok := rs.sortedUniqueTyped(); ok {
			typed++
		}
		if got := rs.sortedUnique(); got != want {
			t.Fatalf("sortedUnique of %+v = %v, cmpKey says %v", rows, got, want)
		}
	}
	if typed < 500 {
		t.Fatalf("the typed loop decided %d of 2000 cases", typed)
	}
}

// TestPagesCapped: a data file's pages hold at most maxPageBuffer of
// buffered values, so an INT64 column's page ends with each 8192-row write
// (under parquet-go's default 256 KiB a page held three writes).
func TestPagesCapped(t *testing.T) {
	const n = 5 * 8192
	var buf bytes.Buffer
	if _, err := encodeRows(&buf, refLayout().pq, refRowSet(refLayout(), backfillRows(0, n))); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, rg := range f.RowGroups() {
		pages := rg.ColumnChunks()[0].Pages() // window_start, INT64
		rows, count := int64(0), 0
		for {
			p, err := pages.ReadPage()
			if err != nil {
				break
			}
			if p.NumRows() > 8192 {
				t.Errorf("page %d holds %d rows, want at most one 8192-row write", count, p.NumRows())
			}
			rows += p.NumRows()
			count++
			parquet.Release(p)
		}
		_ = pages.Close()
		if rows != rg.NumRows() || count < 5 {
			t.Fatalf("%d pages of %d rows in a row group of %d", count, rows, rg.NumRows())
		}
	}
}
