package delta

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/durable"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// sinkRow is one row of the sink table. Timestamps are microseconds since
// the epoch, UTC. nulls has a bit per column (nullWS...) for the rare null
// read from a file another writer produced; rows from the engine have none.
type sinkRow struct {
	WS, WE        int64
	Source, Miner string
	Count         int64
	nulls         uint8
	seq           int32 // input position, only while deduplicating a batch
	// del marks a batch row with Sign -1: the MERGE deletes the target row
	// with its key (never set on rows read from or written to files).
	del bool
}

const (
	nullWS uint8 = 1 << iota
	nullWE
	nullSource
	nullMiner
	nullCount
	nullWindow
)

func rowLess(a, b *sinkRow) bool {
	if a.WS != b.WS {
		return a.WS < b.WS
	}
	if a.WE != b.WE {
		return a.WE < b.WE
	}
	if a.Source != b.Source {
		return a.Source < b.Source
	}
	return a.Miner < b.Miner
}

// Parquet layout of sink data files, in Spark's column order. Only used to
// derive the schema; rows are written as leaf values (writeSinkFile).
type pqWindow struct {
	Start *int64 `parquet:"start,optional,timestamp(microsecond:utc)"`
	End   *int64 `parquet:"end,optional,timestamp(microsecond:utc)"`
}

type pqSinkRow struct {
	Window *pqWindow `parquet:"window,optional"`
	Source *string   `parquet:"source,optional"`
	Miner  *string   `parquet:"miner,optional"`
	Count  *int64    `parquet:"count,optional"`
}

var sinkParquetSchema = parquet.NewSchema("spark_schema", parquet.SchemaOf(new(pqSinkRow)))

// Leaf column indexes in sinkParquetSchema (depth-first order).
const (
	colStart = iota
	colEnd
	colSource
	colMiner
	colCount
)

// writeSinkFile publishes rows (already sorted) as a new uniquely named
// file in the table root (durable NoOverwrite: temp file, fsync, link) and
// returns its add action with full stats. Its directory entry is not yet
// durable: the commit that references it fsyncs the directory first.
func (t *Table) writeSinkFile(rows []sinkRow, now time.Time) (*AddFile, error) {
	name := fmt.Sprintf("part-00000-%s-c000.snappy.parquet", uuid.NewString())
	res, err := t.pub.Publish(t.root, name, durable.Options{NoDirSync: true}, func(w io.Writer) error {
		return encodeSinkRows(w, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("write data file %s: %w", t.fs.PathJoin(t.root, name), err)
	}
	size := res.Size
	stats, err := json.Marshal(computeSinkStats(rows))
	if err != nil {
		return nil, err
	}
	return &AddFile{
		Path: name, PartitionValues: map[string]*string{}, Size: size,
		ModificationTime: now.UnixMilli(), DataChange: true, Stats: string(stats),
	}, nil
}

// encodeSinkRows writes rows column by column: each leaf's values (with
// their definition levels) go straight to its column writer, which skips
// parquet-go's row-to-column shredding. The footer's row count comes from
// the columns, so this is equivalent to WriteRows.
func encodeSinkRows(w io.Writer, rows []sinkRow) error {
	pw := parquet.NewWriter(w, sinkParquetSchema, parquet.Compression(&parquet.Snappy),
		parquet.CreatedBy("ethstream", EngineVersion, ""),
		parquet.PageBufferSize(clampInt(len(rows)*48, 4<<10, parquet.DefaultPageBufferSize)))
	cols := pw.ColumnWriters()
	if len(cols) != 5 {
		return fmt.Errorf("sink parquet schema has %d columns, want 5", len(cols))
	}
	const chunk = 8192
	vals := make([]parquet.Value, 0, chunk)
	for lo := 0; lo < len(rows); lo += chunk {
		part := rows[lo:min(lo+chunk, len(rows))]
		for c := colStart; c <= colCount; c++ {
			vals = vals[:0]
			for i := range part {
				r := &part[i]
				var v parquet.Value
				switch c {
				case colStart:
					v = tsValue(r.WS, r.nulls&nullWS != 0, r.nulls&nullWindow != 0, c)
				case colEnd:
					v = tsValue(r.WE, r.nulls&nullWE != 0, r.nulls&nullWindow != 0, c)
				case colSource:
					v = strValue(r.Source, r.nulls&nullSource != 0, c)
				case colMiner:
					v = strValue(r.Miner, r.nulls&nullMiner != 0, c)
				case colCount:
					if r.nulls&nullCount != 0 {
						v = parquet.NullValue().Level(0, 0, c)
					} else {
						v = parquet.Int64Value(r.Count).Level(0, 1, c)
					}
				}
				vals = append(vals, v)
			}
			if _, err := cols[c].WriteRowValues(vals); err != nil {
				return err
			}
		}
	}
	return pw.Close()
}

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }

func tsValue(v int64, null, windowNull bool, col int) parquet.Value {
	if windowNull {
		return parquet.NullValue().Level(0, 0, col)
	}
	if null {
		return parquet.NullValue().Level(0, 1, col)
	}
	return parquet.Int64Value(v).Level(0, 2, col)
}

func strValue(s string, null bool, col int) parquet.Value {
	if null {
		return parquet.NullValue().Level(0, 0, col)
	}
	// No copy: the column buffer copies the bytes, and s outlives the call.
	return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s))).Level(0, 1, col)
}

// readSinkFile reads every row of a sink-schema data file. Columns are
// found by name, so files other writers produced (INT96 timestamps, other
// column orders, missing columns) read too.
func readSinkFile(fs vfs.FS, path string, dst []sinkRow) ([]sinkRow, error) {
	pf, f, err := openParquet(fs, path)
	if err != nil {
		return dst, err
	}
	defer f.Close()
	schema := pf.Schema()
	type leaf struct {
		idx    int
		maxDef int
		scale  int64 // µs per unit for INT64 timestamps; 0 = INT96
		nanos  bool
	}
	colOf := make([]int, len(schema.Columns())) // file column -> our column + 1
	var leaves [5]leaf
	for i, path := range [][]string{{"window", "start"}, {"window", "end"}, {"source"}, {"miner"}, {"count"}} {
		lc, ok := schema.Lookup(path...)
		if !ok {
			leaves[i].idx = -1
			continue
		}
		l := leaf{idx: lc.ColumnIndex, maxDef: lc.MaxDefinitionLevel, scale: 1}
		if i <= colEnd {
			if lc.Node.Type().Kind() == parquet.Int96 {
				l.scale = 0
			} else if lt, ok := logicalOf(lc.Node).(*format.TimestampType); ok {
				switch lt.Unit.Value.(type) {
				case *format.MilliSeconds:
					l.scale = 1000
				case *format.NanoSeconds:
					l.nanos = true
				}
			}
		}
		leaves[i] = l
		colOf[lc.ColumnIndex] = i + 1
	}
	var missing uint8
	for i, l := range leaves {
		if l.idx < 0 {
			missing |= []uint8{nullWS, nullWE, nullSource, nullMiner, nullCount}[i]
		}
	}
	buf := make([]parquet.Row, clampInt(int(pf.NumRows()), 1, 1024))
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				r := sinkRow{nulls: missing}
				windowNull := true
				for _, v := range row {
					c := colOf[v.Column()]
					if c == 0 {
						continue
					}
					c--
					if v.DefinitionLevel() > 0 && c <= colEnd {
						windowNull = false
					}
					if v.IsNull() {
						r.nulls |= []uint8{nullWS, nullWE, nullSource, nullMiner, nullCount}[c]
						continue
					}
					switch c {
					case colStart, colEnd:
						var us int64
						l := leaves[c]
						switch {
						case l.scale == 0:
							us = int96Micros(v.Int96())
						case l.nanos:
							us = v.Int64() / 1000
						default:
							us = v.Int64() * l.scale
						}
						if c == colStart {
							r.WS = us
						} else {
							r.WE = us
						}
					case colSource:
						r.Source = string(v.ByteArray())
					case colMiner:
						r.Miner = string(v.ByteArray())
					case colCount:
						r.Count = v.Int64()
					}
				}
				if windowNull && leaves[colStart].maxDef > 1 {
					r.nulls |= nullWindow | nullWS | nullWE
				}
				dst = append(dst, r)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return dst, fmt.Errorf("read %s: %w", path, err)
			}
		}
		rows.Close()
	}
	return dst, nil
}

// Stats JSON of sink files, in Spark's shape and key order.
type sinkStatsJSON struct {
	NumRecords int64          `json:"numRecords"`
	MinValues  sinkStatValues `json:"minValues"`
	MaxValues  sinkStatValues `json:"maxValues"`
	NullCount  sinkNullCounts `json:"nullCount"`
}

type windowStatValues struct {
	Start *string `json:"start,omitempty"`
	End   *string `json:"end,omitempty"`
}

type sinkStatValues struct {
	Window *windowStatValues `json:"window,omitempty"`
	Source *string           `json:"source,omitempty"`
	Miner  *string           `json:"miner,omitempty"`
	Count  *int64            `json:"count,omitempty"`
}

type windowNullCounts struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

type sinkNullCounts struct {
	Window windowNullCounts `json:"window"`
	Source int64            `json:"source"`
	Miner  int64            `json:"miner"`
	Count  int64            `json:"count"`
}

// statsPrefixLen is Spark's string stats prefix (32 characters).
const statsPrefixLen = 32

// maxTieBreaker follows a truncated max string so that it stays >= every
// value with that prefix.
const maxTieBreaker = "\U0010FFFF"

func truncMin(s string) string {
	if utf8.RuneCountInString(s) <= statsPrefixLen {
		return s
	}
	return string([]rune(s)[:statsPrefixLen])
}

func truncMax(s string) string {
	if utf8.RuneCountInString(s) <= statsPrefixLen {
		return s
	}
	return string([]rune(s)[:statsPrefixLen]) + maxTieBreaker
}

func usStatString(us int64) *string {
	s := formatStatsTime(time.UnixMicro(us))
	return &s
}

// colStats accumulates one column's min, max and null count.
type colStats[T cmp.Ordered] struct {
	min, max T
	has      bool
	nulls    int64
}

func (c *colStats[T]) add(v T, null bool) {
	switch {
	case null:
		c.nulls++
	case !c.has:
		c.min, c.max, c.has = v, v, true
	default:
		c.min, c.max = min(c.min, v), max(c.max, v)
	}
}

func computeSinkStats(rows []sinkRow) sinkStatsJSON {
	st := sinkStatsJSON{NumRecords: int64(len(rows))}
	var ws, we, cnt colStats[int64]
	var src, miner colStats[string]
	for i := range rows {
		r := &rows[i]
		ws.add(r.WS, r.nulls&nullWS != 0)
		we.add(r.WE, r.nulls&nullWE != 0)
		src.add(r.Source, r.nulls&nullSource != 0)
		miner.add(r.Miner, r.nulls&nullMiner != 0)
		cnt.add(r.Count, r.nulls&nullCount != 0)
	}
	st.NullCount.Window.Start, st.NullCount.Window.End = ws.nulls, we.nulls
	st.NullCount.Source, st.NullCount.Miner, st.NullCount.Count = src.nulls, miner.nulls, cnt.nulls
	if ws.has || we.has {
		st.MinValues.Window, st.MaxValues.Window = &windowStatValues{}, &windowStatValues{}
	}
	if ws.has {
		st.MinValues.Window.Start, st.MaxValues.Window.Start = usStatString(ws.min), usStatString(ws.max)
	}
	if we.has {
		st.MinValues.Window.End, st.MaxValues.Window.End = usStatString(we.min), usStatString(we.max)
	}
	if src.has {
		st.MinValues.Source, st.MaxValues.Source = ptr(truncMin(src.min)), ptr(truncMax(src.max))
	}
	if miner.has {
		st.MinValues.Miner, st.MaxValues.Miner = ptr(truncMin(miner.min)), ptr(truncMax(miner.max))
	}
	if cnt.has {
		st.MinValues.Count, st.MaxValues.Count = &cnt.min, &cnt.max
	}
	return st
}

// fileRange is what a file's stats say about its keys, for MERGE pruning.
// A bound that is unknown leaves the range open on that side.
type fileRange struct {
	numRecords         int64 // -1 unknown
	hasWS              bool
	minWS, maxWS       int64 // maxWS already widened for millisecond truncation
	minSrc, maxSrc     *string
	minMiner, maxMiner *string
}

func statTime(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return ts.UnixMicro(), true
}

func rangeOf(f *AddFile) fileRange {
	fr := fileRange{numRecords: -1}
	st, err := parseStats(f.Stats)
	if err != nil {
		return fr
	}
	if st.NumRecords != nil {
		fr.numRecords = *st.NumRecords
	}
	mw, _ := st.MinValues["window"].(map[string]any)
	xw, _ := st.MaxValues["window"].(map[string]any)
	lo, ok1 := statTime(mw["start"])
	hi, ok2 := statTime(xw["start"])
	if ok1 && ok2 {
		fr.hasWS, fr.minWS, fr.maxWS = true, lo, hi+999 // stats are cut to ms
	}
	str := func(m map[string]any, k string) *string {
		if s, ok := m[k].(string); ok {
			return &s
		}
		return nil
	}
	fr.minSrc, fr.maxSrc = str(st.MinValues, "source"), str(st.MaxValues, "source")
	fr.minMiner, fr.maxMiner = str(st.MinValues, "miner"), str(st.MaxValues, "miner")
	return fr
}

// strMayContain reports whether s can lie within [lo, hi] given that hi may
// be a truncated prefix (with or without a tie-breaker).
func strMayContain(s string, lo, hi *string) bool {
	if lo != nil && s < *lo {
		return false
	}
	if hi != nil && s > *hi && !strings.HasPrefix(s, strings.TrimSuffix(*hi, maxTieBreaker)) {
		return false
	}
	return true
}
