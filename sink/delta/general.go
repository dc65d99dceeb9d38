package delta

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ethstream/ethstream/durable"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
)

// The general MERGE path: a table of any operator output schema (the
// reference table's five columns take the typed sinkRow path instead).
// Rows are slices of gval in layout leaf order; files are written with a
// parquet schema derived from the layout and read back by column name.

// gval is one value of a general row.
type gval struct {
	i    int64 // Int64, Timestamp (µs)
	f    float64
	s    string
	null bool
}

type grow []gval

// generalSink is the state MergeSink keeps for a general table.
type generalSink struct {
	l  *outLayout
	pq *parquet.Schema
}

func newGeneralSink(l *outLayout) *generalSink {
	return &generalSink{l: l, pq: parquetSchemaOf(l)}
}

// parquetSchemaOf builds the parquet schema of a layout through a struct
// type made at run time, so the columns keep the table's order (a
// parquet.Group would sort them by name).
func parquetSchemaOf(l *outLayout) *parquet.Schema {
	leafType := func(t stream.Type) (reflect.Type, string) {
		switch t {
		case stream.Float64:
			return reflect.TypeOf((*float64)(nil)), ",optional"
		case stream.String:
			return reflect.TypeOf((*string)(nil)), ",optional"
		case stream.Timestamp:
			return reflect.TypeOf((*int64)(nil)), ",optional,timestamp(microsecond:utc)"
		}
		return reflect.TypeOf((*int64)(nil)), ",optional"
	}
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

// rows converts an output batch into general rows and their signs.
func (g *generalSink) rows(b *stream.Batch) ([]grow, []int8, error) {
	if b == nil || b.Len == 0 {
		return nil, nil, nil
	}
	if err := b.Validate(); err != nil {
		return nil, nil, errcode.Wrap(err, CodeBadBatch, "", "this is a bug in the pipeline feeding the sink", "invalid batch")
	}
	cols := make([]*stream.Column, len(g.l.leaves))
	for i, lf := range g.l.leaves {
		c := b.Column(lf.col)
		if c == nil || c.Type != lf.typ {
			return nil, nil, errcode.New(CodeBadBatch, "", "the batch must match the schema the sink was opened with",
				"batch column %q is missing or not %s", lf.col, lf.typ)
		}
		cols[i] = c
	}
	rows := make([]grow, b.Len)
	flat := make([]gval, b.Len*len(cols))
	for r := range rows {
		row := flat[r*len(cols) : (r+1)*len(cols) : (r+1)*len(cols)]
		for i, c := range cols {
			v := &row[i]
			if c.IsNull(r) {
				v.null = true
				continue
			}
			switch c.Type {
			case stream.Float64:
				v.f = c.Float64s[r]
			case stream.String:
				v.s = c.Strings[r]
			default:
				v.i = c.Int64s[r]
			}
		}
		rows[r] = row
	}
	return rows, b.Signs, nil
}

func cmpVal(t stream.Type, a, b gval) int {
	if a.null || b.null {
		return cmpNullable(a.null, b.null)
	}
	switch t {
	case stream.Float64:
		return cmp.Compare(a.f, b.f)
	case stream.String:
		return strings.Compare(a.s, b.s)
	}
	return cmp.Compare(a.i, b.i)
}

// cmpKey orders rows by the MERGE key.
func (g *generalSink) cmpKey(a, b grow) int {
	for _, k := range g.l.keys {
		if c := cmpVal(g.l.leaves[k].typ, a[k], b[k]); c != 0 {
			return c
		}
	}
	return 0
}

// keyString encodes a row's key for hashing.
func (g *generalSink) keyString(r grow) string {
	var b []byte
	for _, k := range g.l.keys {
		v := r[k]
		if v.null {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		switch g.l.leaves[k].typ {
		case stream.Float64:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.f))
		case stream.String:
			b = binary.AppendUvarint(b, uint64(len(v.s)))
			b = append(b, v.s...)
		default:
			b = binary.LittleEndian.AppendUint64(b, uint64(v.i))
		}
	}
	return string(b)
}

// fromGeneric converts a row read by readGenericRows.
func (g *generalSink) fromGeneric(m map[string]any) grow {
	row := make(grow, len(g.l.leaves))
	for i, lf := range g.l.leaves {
		var v any
		if len(lf.path) == 2 {
			if w, ok := m[lf.path[0]].(map[string]any); ok {
				v = w[lf.path[1]]
			}
		} else {
			v = m[lf.path[0]]
		}
		switch x := v.(type) {
		case nil:
			row[i].null = true
		case time.Time:
			row[i].i = x.UnixMicro()
		case int64:
			row[i].i = x
		case float64:
			row[i].f = x
		case float32:
			row[i].f = float64(x)
		case string:
			row[i].s = x
		default:
			row[i].null = true
		}
	}
	return row
}

// planGeneralMerge upserts src (deleting the keys of rows with sign -1) into
// the snapshot's table. Files whose window.start range cannot hold a batch
// key are skipped; a candidate file is rewritten only if it holds one.
func (s *Snapshot) planGeneralMerge(ctx context.Context, g *generalSink, src []grow, signs []int8, target int, now time.Time) (*mergePlan, error) {
	start := time.Now()
	plan := &mergePlan{}
	plan.metrics.NumSourceRows = int64(len(src))
	// The last row of a key wins (the engine's order is the update order).
	type upd struct {
		row     grow
		del     bool
		matched bool
	}
	byKey := map[string]*upd{}
	var order []string
	for i, r := range src {
		k := g.keyString(r)
		u, ok := byKey[k]
		if !ok {
			u = &upd{}
			byKey[k] = u
			order = append(order, k)
		}
		u.row, u.del = r, signs != nil && signs[i] < 0
	}
	wsLeaf := -1
	if len(g.l.keys) > 0 && len(g.l.leaves[g.l.keys[0]].path) == 2 {
		wsLeaf = g.l.keys[0]
	}
	var wsKeys []int64
	if wsLeaf >= 0 {
		for _, u := range byKey {
			wsKeys = append(wsKeys, u.row[wsLeaf].i)
		}
		slices.Sort(wsKeys)
	}
	var touched []grow
	live := make([]*AddFile, 0, len(s.files))
	for _, f := range s.files {
		live = append(live, f)
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Path < live[j].Path })
	for _, f := range live {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fr := s.rangeOf(f)
		if fr.numRecords == 0 {
			continue
		}
		if wsLeaf >= 0 && fr.hasWS {
			i := sort.Search(len(wsKeys), func(i int) bool { return wsKeys[i] >= fr.minWS })
			if i == len(wsKeys) || wsKeys[i] > fr.maxWS {
				continue
			}
		}
		p := s.table.filePath(f.Path)
		var rows []grow
		err := readGenericRows(s.table.fs, p, func(m map[string]any) error {
			rows = append(rows, g.fromGeneric(m))
			return nil
		})
		if err != nil {
			return nil, errcode.Wrap(err, CodeMissingFile, p, "restore the file or the table from a backup", "read live data file of version %d", s.Version)
		}
		var updated, deleted int64
		kept := rows[:0]
		for _, r := range rows {
			u, ok := byKey[g.keyString(r)]
			if !ok {
				kept = append(kept, r)
				continue
			}
			u.matched = true
			if u.del {
				deleted++
				continue
			}
			updated++
			kept = append(kept, u.row)
		}
		if updated == 0 && deleted == 0 {
			continue
		}
		plan.metrics.NumTargetRowsUpdated += updated
		plan.metrics.NumTargetRowsDeleted += deleted
		plan.metrics.NumTargetRowsCopied += int64(len(rows)) - updated - deleted
		plan.metrics.NumTargetFilesRemoved++
		plan.metrics.NumTargetBytesRemoved += f.Size
		touched = append(touched, kept...)
		ts := now.UnixMilli()
		size := f.Size
		plan.removes = append(plan.removes, action{Remove: &RemoveFile{
			Path: f.Path, DeletionTimestamp: &ts, DataChange: true, ExtendedFileMetadata: ptr(true),
			PartitionValues: nonNilPV(f.PartitionValues), Size: &size,
			Stats: fmt.Sprintf(`{"numRecords":%d}`, len(rows)),
		}})
	}
	plan.metrics.ScanTimeMs = time.Since(start).Milliseconds()
	for _, k := range order {
		if u := byKey[k]; !u.matched && !u.del {
			touched = append(touched, u.row)
			plan.metrics.NumTargetRowsInserted++
		}
	}
	slices.SortStableFunc(touched, g.cmpKey)
	plan.metrics.NumOutputRows = int64(len(touched))
	rewrite := time.Now()
	for lo := 0; lo < len(touched); lo += target {
		a, err := s.table.writeGeneralFile(g, touched[lo:min(lo+target, len(touched))], now)
		if err != nil {
			plan.abandon()
			return nil, err
		}
		plan.written = append(plan.written, s.table.filePath(a.Path))
		plan.adds = append(plan.adds, action{Add: a})
		plan.metrics.NumTargetFilesAdded++
		plan.metrics.NumTargetBytesAdded += a.Size
	}
	plan.metrics.RewriteTimeMs = time.Since(rewrite).Milliseconds()
	plan.metrics.ExecutionTimeMs = time.Since(start).Milliseconds()
	return plan, nil
}

// writeGeneralFile writes rows to a new data file with stats for every
// column (not yet durable: the commit syncs it).
func (t *Table) writeGeneralFile(g *generalSink, rows []grow, now time.Time) (*AddFile, error) {
	name := fmt.Sprintf("part-00000-%s-c000.snappy.parquet", uuid.NewString())
	res, err := t.pub.Publish(t.root, name, durable.Options{NoDirSync: true}, func(w io.Writer) error {
		return encodeGeneralRows(w, g, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("write data file %s: %w", t.fs.PathJoin(t.root, name), err)
	}
	stats, err := json.Marshal(g.stats(rows))
	if err != nil {
		return nil, err
	}
	return &AddFile{Path: name, PartitionValues: map[string]*string{}, Size: res.Size,
		ModificationTime: now.UnixMilli(), DataChange: true, Stats: string(stats)}, nil
}

// encodeGeneralRows writes rows as one parquet file in the layout's schema.
func encodeGeneralRows(w io.Writer, g *generalSink, rows []grow) error {
	pw := parquet.NewWriter(w, g.pq, parquet.Compression(&parquet.Snappy), parquet.CreatedBy("ethstream", EngineVersion, ""))
	prow := make(parquet.Row, 0, len(g.l.leaves))
	for _, r := range rows {
		prow = prow[:0]
		for i, lf := range g.l.leaves {
			v := r[i]
			def := len(lf.path) // optional window struct + optional leaf, or one optional leaf
			var pv parquet.Value
			switch {
			case v.null:
				pv = parquet.NullValue().Level(0, def-1, i)
			case lf.typ == stream.Float64:
				pv = parquet.DoubleValue(v.f).Level(0, def, i)
			case lf.typ == stream.String:
				pv = parquet.ByteArrayValue([]byte(v.s)).Level(0, def, i)
			default:
				pv = parquet.Int64Value(v.i).Level(0, def, i)
			}
			prow = append(prow, pv)
		}
		if _, err := pw.WriteRows([]parquet.Row{prow}); err != nil {
			return err
		}
	}
	return pw.Close()
}

// stats computes numRecords and, for every column, min, max and null
// count, nested like the schema (window.start, window.end), in Spark's
// forms: timestamps ISO-8601 cut to milliseconds, strings cut to 32
// characters, NaN left out of min/max.
func (g *generalSink) stats(rows []grow) generalStats {
	minV, maxV, nulls := map[string]any{}, map[string]any{}, map[string]any{}
	put := func(m map[string]any, path []string, v any) {
		if len(path) == 2 {
			sub, _ := m[path[0]].(map[string]any)
			if sub == nil {
				sub = map[string]any{}
				m[path[0]] = sub
			}
			sub[path[1]] = v
			return
		}
		m[path[0]] = v
	}
	for i, lf := range g.l.leaves {
		var n int64
		var lo, hi gval
		has := false
		for _, r := range rows {
			v := r[i]
			if v.null {
				n++
				continue
			}
			if lf.typ == stream.Float64 && math.IsNaN(v.f) {
				continue
			}
			if !has || cmpVal(lf.typ, v, lo) < 0 {
				lo = v
			}
			if !has || cmpVal(lf.typ, v, hi) > 0 {
				hi = v
			}
			has = true
		}
		put(nulls, lf.path, n)
		if !has {
			continue
		}
		switch lf.typ {
		case stream.Timestamp:
			put(minV, lf.path, formatStatsTime(time.UnixMicro(lo.i)))
			put(maxV, lf.path, formatStatsTime(time.UnixMicro(hi.i)))
		case stream.Float64:
			put(minV, lf.path, lo.f)
			put(maxV, lf.path, hi.f)
		case stream.String:
			put(minV, lf.path, truncMin(lo.s))
			put(maxV, lf.path, truncMax(hi.s))
		default:
			put(minV, lf.path, lo.i)
			put(maxV, lf.path, hi.i)
		}
	}
	return generalStats{NumRecords: int64(len(rows)), MinValues: minV, MaxValues: maxV, NullCount: nulls}
}

// generalStats is the stats JSON in Spark's key order.
type generalStats struct {
	NumRecords int64          `json:"numRecords"`
	MinValues  map[string]any `json:"minValues"`
	MaxValues  map[string]any `json:"maxValues"`
	NullCount  map[string]any `json:"nullCount"`
}
