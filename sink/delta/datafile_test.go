package delta

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// foreignWindow and foreignRow are a reference-table file as another writer
// may produce it: INT96 and millisecond timestamps, dictionary-encoded
// strings, the columns in another order, source missing.
type foreignWindow struct {
	Start *deprecated.Int96 `parquet:"start,optional"`
	End   *int64            `parquet:"end,optional,timestamp(millisecond:utc)"`
}

type foreignRow struct {
	Count  *int64         `parquet:"count,optional"`
	Miner  *string        `parquet:"miner,optional,dict"`
	Window *foreignWindow `parquet:"window,optional"`
}

// TestReadForeignDataFile: the columnar decoder reads such a file, in
// several row groups, as the generic reader does.
func TestReadForeignDataFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part-foreign.parquet")
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[foreignRow](f, parquet.MaxRowsPerRowGroup(3))
	int96 := func(us int64) *deprecated.Int96 {
		days, rem := us/86400_000_000, us%86400_000_000
		nanos := uint64(rem * 1000)
		v := deprecated.Int96{uint32(nanos), uint32(nanos >> 32), uint32(days + 2440588)}
		return &v
	}
	var rows []foreignRow
	for i := range 8 {
		ws := baseTS + int64(i%3)*window
		we := (ws + window) / 1000
		r := foreignRow{Count: ptr(int64(i)), Miner: ptr(fmt.Sprintf("m%d", i%2)), Window: &foreignWindow{Start: int96(ws), End: &we}}
		switch i {
		case 2:
			r.Window = nil
		case 4:
			r.Window.End, r.Miner = nil, nil
		case 6:
			r.Count = nil
		}
		rows = append(rows, r)
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	pf, fh, err := openParquet(vfs.Default, path)
	if err != nil {
		t.Fatal(err)
	}
	groups := len(pf.RowGroups())
	dict := pf.Metadata().RowGroups[0].Columns[1].MetaData.DictionaryPageOffset != 0
	fh.Close()
	if groups != 3 || !dict {
		t.Fatalf("%d row groups, miner dictionary-encoded %v; want 3, true", groups, dict)
	}
	rs, err := readDataFile(vfs.Default, path, refLayout())
	if err != nil {
		t.Fatal(err)
	}
	var typed, generic []string
	for _, r := range refRowsOf(rs) {
		typed = append(typed, fmt.Sprintf("%d %d %q %q %d %06b", r.WS, r.WE, r.Source, r.Miner, r.Count, r.nulls))
	}
	if err := readGenericRows(vfs.Default, path, func(m map[string]any) error {
		var r refRow
		w, _ := m["window"].(map[string]any)
		if w == nil {
			r.nulls |= nullWindow | nullWS | nullWE
		} else {
			if ts, ok := w["start"].(time.Time); ok {
				r.WS = ts.UnixMicro()
			} else {
				r.nulls |= nullWS
			}
			if ts, ok := w["end"].(time.Time); ok {
				r.WE = ts.UnixMicro()
			} else {
				r.nulls |= nullWE
			}
		}
		r.nulls |= nullSource
		if s, ok := m["miner"].(string); ok {
			r.Miner = s
		} else {
			r.nulls |= nullMiner
		}
		if n, ok := m["count"].(int64); ok {
			r.Count = n
		} else {
			r.nulls |= nullCount
		}
		generic = append(generic, fmt.Sprintf("%d %d %q %q %d %06b", r.WS, r.WE, r.Source, r.Miner, r.Count, r.nulls))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(typed) != fmt.Sprint(generic) || len(typed) != 8 {
		t.Fatalf("columnar\n%v\ngeneric\n%v", typed, generic)
	}
	if rs.winNull == nil || !rs.winNull[2] || rs.winNull[4] {
		t.Fatalf("window nulls %v, want row 2 only", rs.winNull)
	}
}
