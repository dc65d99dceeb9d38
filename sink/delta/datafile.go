package delta

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/internal/parquettype"
	"github.com/ethstream/ethstream/stream"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Data files of the sink's tables: one Parquet schema per layout (every
// field OPTIONAL, the window a group of two INT64 TIMESTAMP(MICROS, UTC)
// leaves, strings BYTE_ARRAY (STRING), longs INT64, doubles DOUBLE), snappy
// pages without header statistics (dataFileOptions), and the add action's
// stats. The reference table's values and pages are those its typed writer
// wrote before this one replaced it.

// parquetSchemaOf builds the parquet schema of a layout through a struct
// type made at run time, so the columns keep the table's order (a
// parquet.Group would sort them by name).
func parquetSchemaOf(l *outLayout) *parquet.Schema {
	var fields []reflect.StructField
	for i := 0; i < len(l.leaves); i++ {
		lf := l.leaves[i]
		if len(lf.path) == 2 { // the window struct: start, end
			st, sTag := leafType(stream.Timestamp)
			win := reflect.StructOf([]reflect.StructField{
				{Name: "Start", Type: st, Tag: reflect.StructTag(`parquet:"` + windowStart + sTag + `"`)},
				{Name: "End", Type: st, Tag: reflect.StructTag(`parquet:"` + windowEnd + sTag + `"`)},
			})
			fields = append(fields, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: reflect.PointerTo(win),
				Tag: reflect.StructTag(`parquet:"` + windowField + `,optional"`)})
			i++
			continue
		}
		t, tag := leafType(lf.typ)
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: t,
			Tag: reflect.StructTag(`parquet:"` + lf.path[0] + tag + `"`)})
	}
	return parquet.NewSchema("spark_schema", parquet.SchemaOf(reflect.New(reflect.StructOf(fields)).Interface()))
}

// leafType is the Go type and parquet tag of a leaf of type t in
// parquetSchemaOf's run-time struct (package parquettype). A layout holds
// only types with a Delta type, each of which is written: another is a bug.
func leafType(t stream.Type) (reflect.Type, string) {
	rt, tag, ok := parquettype.GoType(t)
	if !ok {
		panic(fmt.Sprintf("delta: a layout column of type %s, which has no Parquet writer", t))
	}
	return rt, tag
}

// writeDataFile publishes rows (already sorted) as a new uniquely named
// file in the table root (durable NoOverwrite: temp file, fsync, link) and
// returns its add action with full stats. Its directory entry is not yet
// durable: the commit that references it fsyncs the directory first.
func (t *Table) writeDataFile(pq *parquet.Schema, rows *rowSet, now time.Time) (*AddFile, error) {
	name := fmt.Sprintf("part-00000-%s-c000.snappy.parquet", uuid.NewString())
	var groups []format.RowGroup
	res, err := t.pub.Publish(t.root, name, durable.Options{NoDirSync: true}, func(w io.Writer) (err error) {
		groups, err = encodeRows(w, pq, rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("write data file %s: %w", t.fs.PathJoin(t.root, name), err)
	}
	return &AddFile{
		Path: name, PartitionValues: map[string]*string{}, Size: res.Size,
		ModificationTime: now.UnixMilli(), DataChange: true, Stats: rows.stats(groups),
	}, nil
}

// encodeRows writes rows column by column. An aggregation's output
// (longs, timestamps, doubles and strings) goes through encodeDirect,
// which encodes the pages itself; any other layout through parquet-go's
// column writers, to which each leaf's values (with their definition
// levels) go straight, which skips parquet-go's row-to-column shredding.
// The footer's row count comes from the columns, so this is equivalent to
// WriteRows. It returns the footer's row groups, whose column chunk
// statistics the add action's stats reuse. parquet-go v0.32.0 has no
// typed write into a ColumnWriter: its column buffer is unexported, the
// typed writers (Int64Writer, ByteArrayWriter, DoubleWriter) are only on
// REQUIRED columns' buffers (every leaf here is OPTIONAL), and
// GenericWriter's typed path needs the row type at compile time. So the
// column writers take parquet.Values.
func encodeRows(w io.Writer, pq *parquet.Schema, rows *rowSet) ([]format.RowGroup, error) {
	if groups, ok, err := encodeDirect(w, pq, rows); ok {
		return groups, err
	}
	pw := parquet.NewWriter(w, dataFileOptions(pq, rows.n)...)
	cols := pw.ColumnWriters()
	if len(cols) != len(rows.cols) {
		return nil, fmt.Errorf("parquet schema has %d columns, the layout %d", len(cols), len(rows.cols))
	}
	vals := make([]parquet.Value, 0, min(encodeChunkRows, rows.n))
	var sc parquettype.Scratch // a wide DECIMAL's bytes: the column writer copies them
	for lo := 0; lo < rows.n; lo += encodeChunkRows {
		hi := min(lo+encodeChunkRows, rows.n)
		for c := range rows.cols {
			sc.Reset()
			vals = rows.appendValues(vals[:0], &sc, c, lo, hi)
			if _, err := cols[c].WriteRowValues(vals); err != nil {
				return nil, err
			}
		}
	}
	if err := pw.Close(); err != nil {
		return nil, err
	}
	return pw.File().Metadata().RowGroups, nil
}

// encodeChunkRows is the rows of each of encodeRows' writes to a column: a
// page ends only after one.
const encodeChunkRows = 8192

// dataFileOptions are the parquet writer's options for a file of schema
// pq and n rows.
// The page buffer is sized for about 48 bytes a row, so that a live
// batch's small file does not allocate the default 256 KiB per column,
// and at most 64 KiB (maxPageBuffer).
// Pages carry no statistics in their headers, as Spark's parquet-mr
// writes them since 1.11 (PARQUET-1365: readers use the column index,
// which the file keeps, as it keeps the column chunks' min and max): each
// page's bounds were computed twice, once for each, and the header's copy
// was 0.2 of a seed backfill's 1.8 CPU-s of encoding.
func dataFileOptions(pq *parquet.Schema, n int) []parquet.WriterOption {
	return []parquet.WriterOption{pq, parquet.Compression(fastSnappy{}),
		parquet.CreatedBy("ethstream", EngineVersion, ""),
		parquet.PageBufferSize(pageBufferSize(n)),
		parquet.DataPageStatistics(false)}
}

// appendValues appends the parquet values of column c, rows [lo, hi), with
// their definition levels: a window leaf is at level 2 (1 when null, 0 when
// the window itself is null), any other leaf at 1 (0 when null); a wide
// DECIMAL's bytes go to sc.
func (rs *rowSet) appendValues(dst []parquet.Value, sc *parquettype.Scratch, c, lo, hi int) []parquet.Value {
	v := &rs.cols[c]
	def := len(rs.l.leaves[c].path)
	typ := rs.l.leaves[c].typ
	if typ.Kind() == stream.Array {
		return rs.appendListValues(dst, sc, c, lo, hi)
	}
	// A column without nulls (and no null window above it) of the usual
	// types takes a loop of its own: the per-value checks of the general
	// loop below were a third of this function's time in a seed backfill
	// (9.7M rows of five leaves).
	// The values are built in place with the pointer setters, which inline:
	// Value.Level copies the 24-byte value twice and did not inline (half
	// of this function's time in a seed backfill's profile).
	if v.Valid == nil && (def != 2 || rs.winNull == nil) {
		switch typ {
		case stream.Int64, stream.Timestamp:
			n := len(dst)
			dst = slices.Grow(dst, hi-lo)[:n+hi-lo]
			out := dst[n:]
			for j, x := range v.Int64s[lo:hi] {
				out[j] = parquet.Int64Value(x)
				out[j].SetDefinitionLevel(def)
				out[j].SetColumnIndex(c)
			}
			return dst
		case stream.String:
			n := len(dst)
			dst = slices.Grow(dst, hi-lo)[:n+hi-lo]
			out := dst[n:]
			for j, s := range v.Strings[lo:hi] {
				out[j] = parquet.ByteArrayValue(parquettype.Bytes(s))
				out[j].SetDefinitionLevel(def)
				out[j].SetColumnIndex(c)
			}
			return dst
		case stream.Float64:
			n := len(dst)
			dst = slices.Grow(dst, hi-lo)[:n+hi-lo]
			out := dst[n:]
			for j, x := range v.Float64s[lo:hi] {
				out[j] = parquet.DoubleValue(x)
				out[j].SetDefinitionLevel(def)
				out[j].SetColumnIndex(c)
			}
			return dst
		}
	}
	// The general loop builds each value in place too (see above).
	n := len(dst)
	dst = slices.Grow(dst, hi-lo)[:n+hi-lo]
	out := dst[n:]
	for j := range out {
		i := lo + j
		x := &out[j]
		switch {
		case def == 2 && rs.winNull != nil && rs.winNull[i]:
			*x = parquet.NullValue()
			x.SetDefinitionLevel(0)
		case v.IsNull(i):
			*x = parquet.NullValue()
			x.SetDefinitionLevel(def - 1)
		case typ == stream.Float64:
			*x = parquet.DoubleValue(v.Float64s[i])
			x.SetDefinitionLevel(def)
		case typ != stream.String && typ != stream.Int64 && typ != stream.Timestamp:
			*x = sc.Value(typ, v, i)
			x.SetDefinitionLevel(def)
		case typ == stream.String:
			*x = parquet.ByteArrayValue(parquettype.Bytes(v.Strings[i]))
			x.SetDefinitionLevel(def)
		default:
			*x = parquet.Int64Value(v.Int64s[i])
			x.SetDefinitionLevel(def)
		}
		x.SetColumnIndex(c)
	}
	return dst
}

// maxPageBuffer caps a column's page buffer. Under it each of encodeRows'
// 8192-row writes of an INT64 column (13 bytes a value in the buffer: the
// value, its row index and level) ends a page, as a long string column's
// did under the default 256 KiB, where a page held three writes: its
// 64 KiB of values go to s2's faster encoder of blocks up to 64 KiB, and
// the buffer no longer grows to three writes' values (1.3 MB allocated per
// seed backfill file, 0.9 now). A seed-shaped 700k-row batch took 19% less
// CPU in the sink (BenchmarkBackfillBatchSeed), reading a file no more
// (BenchmarkReadDataFile); a file is 0.4% larger (page headers, column
// index entries).
const maxPageBuffer = 64 << 10

// pageBufferSize is the page buffer of a file of n rows (dataFileOptions).
func pageBufferSize(n int) int { return clampInt(n*48, 4<<10, maxPageBuffer) }

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }

// readDataFile reads every row of a data file of layout l through the one
// Parquet decoder (package columnar). Columns are found by name, so files
// other writers produced (INT96 or milli/nano timestamps, INT32, FLOAT or
// DECIMAL columns, other column orders, missing columns: null) read too,
// with the repository's one table of conversions.
func readDataFile(fs vfs.FS, path string, l *outLayout) (*rowSet, error) {
	pf, f, err := openParquet(fs, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fields := make([]columnar.Field, len(l.leaves))
	for i, lf := range l.leaves {
		fields[i] = columnar.Field{Name: lf.col, Path: lf.path, Type: lf.typ, Parent: len(lf.path) == 2}
	}
	dec, err := columnar.Open(pf, fields, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	groups := len(pf.RowGroups())
	var rs *rowSet
	for g := range groups {
		rg, err := dec.DecodeRowGroup(g)
		if err != nil {
			return nil, fmt.Errorf("read %s: row group %d: %w", path, g, err)
		}
		src := &rowSet{l: l, cols: rg.Batch.Columns, n: rg.Batch.Len, winNull: windowNulls(rg)}
		if groups == 1 {
			return src, nil // the decoded columns are the file's rows
		}
		if rs == nil {
			rs = newRowSet(l, int(pf.NumRows()))
		}
		rs.appendRange(src, 0, src.n)
	}
	if rs == nil {
		rs = newRowSet(l, 0)
	}
	return rs, nil
}

// windowNulls marks the rows of a row group whose window struct itself is
// null (no window leaf reaches the struct's definition level); nil when
// every row has one.
func windowNulls(rg columnar.RowGroup) []bool {
	var seen []bool
	for _, p := range rg.Parents {
		if p == nil {
			continue
		}
		if seen == nil {
			seen = make([]bool, len(p))
		}
		for r, ok := range p {
			seen[r] = seen[r] || ok
		}
	}
	if !slices.Contains(seen, false) {
		return nil
	}
	null := make([]bool, len(seen))
	for r, ok := range seen {
		null[r] = !ok
	}
	return null
}

// statsPrefixLen is Spark's string stats prefix (32 characters).
const statsPrefixLen = 32

// maxTieBreaker follows a truncated max string so that it stays >= every
// value with that prefix.
const maxTieBreaker = "\U0010FFFF"

func truncMin(s string) string {
	if len(s) <= statsPrefixLen { // bytes >= runes
		return s
	}
	if r := []rune(s); len(r) > statsPrefixLen {
		return string(r[:statsPrefixLen])
	}
	return s
}

func truncMax(s string) string {
	if len(s) <= statsPrefixLen {
		return s
	}
	if r := []rune(s); len(r) > statsPrefixLen {
		return string(r[:statsPrefixLen]) + maxTieBreaker
	}
	return s
}

// colStat is one column's min and max (rows lo and hi of col) and null
// count.
type colStat struct {
	col    *stream.Column
	lo, hi int
	has    bool
	nulls  int64
}

// stats is the add action's stats JSON, in Spark's shape and key order:
// numRecords; minValues and maxValues per column, nested like the schema
// (window.start, window.end), timestamps ISO-8601 cut to milliseconds,
// strings cut to 32 characters (a cut max followed by U+10FFFF), NaN and
// infinities left out, a column without values left out; nullCount per
// column, always present. groups are the row groups of the file the rows
// were written to (nil: not known): their column chunks' statistics give
// the strings' and integers' (chunkStat).
func (rs *rowSet) stats(groups []format.RowGroup) string {
	st := make([]colStat, len(rs.cols))
	for c := range rs.cols {
		var ok bool
		if groups != nil {
			st[c], ok = rs.chunkStat(c, groups)
		}
		if !ok {
			st[c] = rs.colStat(c)
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"numRecords":`)
	b.WriteString(strconv.Itoa(rs.n))
	b.WriteString(`,"minValues":`)
	rs.writeStatValues(&b, st, true)
	b.WriteString(`,"maxValues":`)
	rs.writeStatValues(&b, st, false)
	b.WriteString(`,"nullCount":{`)
	for c := 0; c < len(rs.cols); c++ {
		if c > 0 {
			b.WriteByte(',')
		}
		lf := rs.l.leaves[c]
		if len(lf.path) == 2 {
			fmt.Fprintf(&b, `%s:{%s:%d,%s:%d}`, jsonStr(lf.path[0]), jsonStr(lf.path[1]), st[c].nulls,
				jsonStr(rs.l.leaves[c+1].path[1]), st[c+1].nulls)
			c++
			continue
		}
		fmt.Fprintf(&b, `%s:%d`, jsonStr(lf.path[0]), st[c].nulls)
	}
	b.WriteString("}}")
	return b.String()
}

func (rs *rowSet) colStat(c int) colStat {
	v := &rs.cols[c]
	s := colStat{col: v}
	// One loop per type: this runs over every value of every file written.
	switch t := rs.l.leaves[c].typ; {
	case t.Kind() == stream.Array:
		for i := range rs.n {
			if v.IsNull(i) {
				s.nulls++
			}
		}
		return s // no min/max of an array
	case t.Kind() == stream.Decimal:
		for i, x := range v.Decimals[:rs.n] {
			switch {
			case v.IsNull(i):
				s.nulls++
			case !s.has:
				s.lo, s.hi, s.has = i, i, true
			case x.Cmp(v.Decimals[s.lo]) < 0:
				s.lo = i
			case x.Cmp(v.Decimals[s.hi]) > 0:
				s.hi = i
			}
		}
	case t.Storage() == stream.Float64:
		for i, x := range v.Float64s[:rs.n] {
			switch {
			case v.IsNull(i):
				s.nulls++
			case math.IsNaN(x) || math.IsInf(x, 0):
			case !s.has:
				s.lo, s.hi, s.has = i, i, true
			case x < v.Float64s[s.lo]:
				s.lo = i
			case x > v.Float64s[s.hi]:
				s.hi = i
			}
		}
	case t.Storage() == stream.String:
		orderedStat(&s, v, v.Strings[:rs.n])
	default:
		orderedStat(&s, v, v.Int64s[:rs.n])
	}
	if t := rs.l.leaves[c].typ; t == stream.Boolean || t == stream.Binary {
		s.has = false // Delta keeps no min/max of a boolean or binary column
	}
	return s
}

// chunkStat is colStat(c) read from the column chunks' statistics of
// groups, which the Parquet writer computed from the pages' bounds as it
// wrote them: a second pass over the values here was 0.2 of a seed
// backfill's 2.4 CPU-s of sink writes. It covers the columns whose Parquet
// order is Delta's (ok): strings (bytes, unsigned, as Go compares strings)
// and integers, dates and timestamps (signed INT32 or INT64); floats (NaN
// and infinities are left out of Delta's stats, not of Parquet's),
// decimals, booleans, binaries and arrays are counted by colStat.
func (rs *rowSet) chunkStat(c int, groups []format.RowGroup) (s colStat, ok bool) {
	typ := rs.l.leaves[c].typ
	if typ != stream.String && (typ.Storage() != stream.Int64 || typ == stream.Boolean) {
		return s, false
	}
	v := stream.MakeColumn("", typ, 2, 2)
	s.col, s.lo, s.hi = &v, 0, 1
	for _, g := range groups {
		if c >= len(g.Columns) {
			return s, false
		}
		md := &g.Columns[c].MetaData
		st := &md.Statistics
		s.nulls += st.NullCount
		if st.MinValue == nil || st.MaxValue == nil {
			continue // nulls only
		}
		switch {
		case md.Type == format.ByteArray && typ == stream.String:
			lo, hi := string(st.MinValue), string(st.MaxValue)
			if !s.has || lo < v.Strings[0] {
				v.Strings[0] = lo
			}
			if !s.has || hi > v.Strings[1] {
				v.Strings[1] = hi
			}
		case md.Type == format.Int64 && len(st.MinValue) == 8 && len(st.MaxValue) == 8:
			s.widen(&v, int64(binary.LittleEndian.Uint64(st.MinValue)), int64(binary.LittleEndian.Uint64(st.MaxValue)))
		case md.Type == format.Int32 && len(st.MinValue) == 4 && len(st.MaxValue) == 4:
			s.widen(&v, int64(int32(binary.LittleEndian.Uint32(st.MinValue))), int64(int32(binary.LittleEndian.Uint32(st.MaxValue))))
		default:
			return s, false
		}
		s.has = true
	}
	return s, true
}

// widen extends s's integer bounds (rows 0 and 1 of v) to lo and hi.
func (s *colStat) widen(v *stream.Column, lo, hi int64) {
	if !s.has || lo < v.Int64s[0] {
		v.Int64s[0] = lo
	}
	if !s.has || hi > v.Int64s[1] {
		v.Int64s[1] = hi
	}
}

// orderedStat adds to s the nulls and the positions of the least and
// greatest values of xs, the values of v (strings and integers; a float
// column skips NaN and infinities, so colStat loops over it itself). Each
// instantiation is its own loop, as colStat's are.
func orderedStat[T cmp.Ordered](s *colStat, v *stream.Column, xs []T) {
	for i, x := range xs {
		switch {
		case v.IsNull(i):
			s.nulls++
		case !s.has:
			s.lo, s.hi, s.has = i, i, true
		case x < xs[s.lo]:
			s.lo = i
		case x > xs[s.hi]:
			s.hi = i
		}
	}
}

func (rs *rowSet) writeStatValues(b *bytes.Buffer, st []colStat, isMin bool) {
	b.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			b.WriteByte(',')
		}
		first = false
	}
	for c := 0; c < len(rs.cols); c++ {
		lf := rs.l.leaves[c]
		if len(lf.path) == 2 {
			if st[c].has || st[c+1].has {
				sep()
				b.WriteString(jsonStr(lf.path[0]) + ":{")
				if st[c].has {
					b.WriteString(jsonStr(lf.path[1]) + ":" + rs.statValue(c, st[c], isMin))
				}
				if st[c+1].has {
					if st[c].has {
						b.WriteByte(',')
					}
					b.WriteString(jsonStr(rs.l.leaves[c+1].path[1]) + ":" + rs.statValue(c+1, st[c+1], isMin))
				}
				b.WriteByte('}')
			}
			c++
			continue
		}
		if st[c].has {
			sep()
			b.WriteString(jsonStr(lf.path[0]) + ":" + rs.statValue(c, st[c], isMin))
		}
	}
	b.WriteByte('}')
}

// statValue renders column c's min or max as JSON.
func (rs *rowSet) statValue(c int, s colStat, isMin bool) string {
	i := s.hi
	if isMin {
		i = s.lo
	}
	v := s.col
	switch rs.l.leaves[c].typ {
	case stream.Timestamp:
		return jsonStr(formatStatsTime(time.UnixMicro(v.Int64s[i])))
	case stream.Float64:
		js, _ := json.Marshal(v.Float64s[i]) // finite: NaN and infinities have no stats
		return string(js)
	case stream.String:
		if isMin {
			return jsonStr(truncMin(v.Strings[i]))
		}
		return jsonStr(truncMax(v.Strings[i]))
	}
	text, _ := statText(rs.l.leaves[c].typ, v, i)
	return text
}

// jsonStr encodes s as encoding/json does (HTML characters escaped).
func jsonStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
