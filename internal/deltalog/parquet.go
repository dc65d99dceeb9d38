package deltalog

import (
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// OpenParquet opens a parquet file of fs. The caller closes the returned file.
func OpenParquet(fs vfs.FS, path string) (*parquet.File, vfs.File, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("open parquet %s: %w", path, err)
	}
	return pf, f, nil
}

// ReadGenericRows calls fn with every row of a parquet file, reconstructed
// as nested Go values and normalised (normalize) so that timestamps are
// time.Time whatever their physical encoding.
func ReadGenericRows(fs vfs.FS, path string, fn func(map[string]any) error) error {
	pf, f, err := OpenParquet(fs, path)
	if err != nil {
		return err
	}
	defer f.Close()
	schema := pf.Schema()
	buf := make([]parquet.Row, 64)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for i := 0; i < n; i++ {
				var v any
				if rerr := schema.Reconstruct(&v, buf[i]); rerr != nil {
					rows.Close()
					return fmt.Errorf("read %s: %w", path, rerr)
				}
				m, _ := normalize(schema, v).(map[string]any)
				if m == nil {
					m = map[string]any{}
				}
				if ferr := fn(m); ferr != nil {
					rows.Close()
					return ferr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rows.Close()
				return fmt.Errorf("read %s: %w", path, err)
			}
		}
		rows.Close()
	}
	return nil
}

func logicalOf(n parquet.Node) format.LogicalTypeValue {
	if n.Leaf() || n.Type() != nil {
		if lt := n.Type().LogicalType(); lt != nil {
			return lt.Value
		}
	}
	return nil
}

func convertedOf(n parquet.Node) (deprecated.ConvertedType, bool) {
	if ct := n.Type().ConvertedType(); ct != nil {
		return *ct, true
	}
	return 0, false
}

func isMapNode(n parquet.Node) bool {
	if n.Leaf() {
		return false
	}
	if _, ok := logicalOf(n).(*format.MapType); ok {
		return true
	}
	ct, ok := convertedOf(n)
	return ok && (ct == deprecated.Map || ct == deprecated.MapKeyValue)
}

func isListNode(n parquet.Node) bool {
	if n.Leaf() {
		return false
	}
	if _, ok := logicalOf(n).(*format.ListType); ok {
		return true
	}
	ct, ok := convertedOf(n)
	return ok && ct == deprecated.List
}

func childNode(n parquet.Node, name string) parquet.Node {
	for _, f := range n.Fields() {
		if f.Name() == name {
			return f
		}
	}
	return nil
}

// normalize converts the values parquet-go reconstructs into an `any` to the
// forms the rest of the package uses: timestamps (INT96 or INT64 with any
// unit, converted by package columnar's table) become time.Time in UTC, dates "YYYY-MM-DD", byte arrays strings,
// integers int64, groups map[string]any, lists []any.
func normalize(n parquet.Node, v any) any {
	if v == nil || n == nil {
		return nil
	}
	if p, ok := v.(*[]byte); ok {
		if p == nil {
			return nil
		}
		v = *p
	}
	if n.Leaf() {
		return normalizeLeaf(n, v)
	}
	switch {
	case isMapNode(n):
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		var valNode parquet.Node
		if kv := n.Fields(); len(kv) == 1 {
			valNode = childNode(kv[0], "value")
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[k] = normalize(valNode, e)
		}
		return out
	case isListNode(n):
		s, ok := v.([]any)
		if !ok {
			return v
		}
		var elem parquet.Node
		if rep := n.Fields(); len(rep) == 1 {
			elem = rep[0]
			if f := elem.Fields(); !elem.Leaf() && len(f) == 1 {
				elem = f[0]
			}
		}
		out := make([]any, len(s))
		for i, e := range s {
			out[i] = normalize(elem, e)
		}
		return out
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for _, f := range n.Fields() {
		if e, present := m[f.Name()]; present {
			m[f.Name()] = normalize(f, e)
		}
	}
	return m
}

func normalizeLeaf(n parquet.Node, v any) any {
	switch x := v.(type) {
	case deprecated.Int96:
		return time.UnixMicro(columnar.Int96Micros(x)).UTC()
	case []byte:
		return string(x)
	case time.Time:
		return x.UTC()
	}
	if i, ok := toInt64(v); ok && n.Type().Kind() == parquet.Int64 {
		// An annotated timestamp, by the repository's one table (package
		// columnar); an unannotated integer stays an integer here.
		if ts, ok := columnar.TimestampOf(columnar.NodeElement(n)); ok && ts.Unit != columnar.Infer {
			return time.UnixMicro(ts.Micros(i)).UTC()
		}
	}
	switch logicalOf(n).(type) {
	case *format.DateType:
		if i, ok := toInt64(v); ok {
			return time.Unix(i*86400, 0).UTC().Format("2006-01-02")
		}
	}
	if ct, ok := convertedOf(n); ok {
		switch ct {
		case deprecated.Date:
			if i, ok := toInt64(v); ok {
				return time.Unix(i*86400, 0).UTC().Format("2006-01-02")
			}
		}
	}
	if i, ok := toInt64(v); ok {
		return i
	}
	return v
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	}
	return 0, false
}
