package delta

import (
	"context"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/stream"
)

// refRow is one row of the reference table (ReferenceSchema), the fixture
// most tests write. Timestamps are microseconds since the epoch, UTC; nulls
// has a bit per column (nullWS...) for rows another writer may produce.
type refRow struct {
	WS, WE        int64
	Source, Miner string
	Count         int64
	nulls         uint8
	del           bool // a batch row with sign -1
}

const (
	nullWS uint8 = 1 << iota
	nullWE
	nullSource
	nullMiner
	nullCount
	nullWindow // the window struct itself; set with nullWS|nullWE
)

// refLayout is the reference table's layout, keyed by ReferenceSchema's key.
func refLayout() *outLayout {
	l, err := sinkLayout(ReferenceSchema(), nil, "")
	if err != nil {
		panic(err)
	}
	return l
}

// refRowSet converts fixture rows to rows of layout l (the reference
// table's columns, keyed as l says).
func refRowSet(l *outLayout, rows []refRow) *rowSet {
	rs := newRowSet(l, len(rows))
	for _, r := range rows {
		src := &rowSet{l: l, n: 1, cols: []stream.Column{{Type: stream.Timestamp, Int64s: []int64{r.WS}}, {Type: stream.Timestamp, Int64s: []int64{r.WE}},
			{Type: stream.String, Strings: []string{r.Source}}, {Type: stream.String, Strings: []string{r.Miner}}, {Type: stream.Int64, Int64s: []int64{r.Count}}}}
		for c, bit := range []uint8{nullWS, nullWE, nullSource, nullMiner, nullCount} {
			if r.nulls&bit != 0 {
				src.cols[c].Valid = []bool{false}
			}
		}
		if r.nulls&nullWindow != 0 {
			src.winNull = []bool{true}
		}
		if r.del {
			src.del = []bool{true}
		}
		rs.appendRow(src, 0)
	}
	return rs
}

// refRowsOf converts rows of the reference layout back to fixture rows.
func refRowsOf(rs *rowSet) []refRow {
	out := make([]refRow, rs.n)
	for i := range out {
		r := &out[i]
		r.WS, r.WE, r.Source, r.Miner, r.Count = rs.cols[0].Int64s[i], rs.cols[1].Int64s[i], rs.cols[2].Strings[i], rs.cols[3].Strings[i], rs.cols[4].Int64s[i]
		for c, bit := range []uint8{nullWS, nullWE, nullSource, nullMiner, nullCount} {
			if rs.cols[c].IsNull(i) {
				r.nulls |= bit
			}
		}
		if rs.winNull != nil && rs.winNull[i] {
			r.nulls |= nullWindow
		}
	}
	return out
}

// rows converts fixture rows for this sink's layout.
func (m *MergeSink) rows(rows []refRow) *rowSet { return refRowSet(m.layout, rows) }

// writeRefFile writes fixture rows as one data file, in the given order.
func (t *Table) writeRefFile(rows []refRow, now time.Time) (*AddFile, error) {
	l := refLayout()
	return t.writeDataFile(l.pq, refRowSet(l, rows), now)
}

// readRefFile reads a reference-table data file as fixture rows.
func readRefFile(fs vfs.FS, path string) ([]refRow, error) {
	rs, err := readDataFile(fs, path, refLayout())
	if err != nil {
		return nil, err
	}
	return refRowsOf(rs), nil
}

// refRows calls fn for every live row of a reference table.
func (s *Snapshot) refRows(ctx context.Context, fn func(*refRow) error) error {
	return s.scanRows(ctx, refLayout(), func(rs *rowSet) error {
		for _, r := range refRowsOf(rs) {
			if err := fn(&r); err != nil {
				return err
			}
		}
		return nil
	})
}
