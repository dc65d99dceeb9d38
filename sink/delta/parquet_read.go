package delta

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/deltalog"
	"github.com/parquet-go/parquet-go"
)

// openParquet opens a parquet file of fs (deltalog.OpenParquet).
func openParquet(fs vfs.FS, path string) (*parquet.File, vfs.File, error) {
	return deltalog.OpenParquet(fs, path)
}

// readGenericRows calls fn with every row of a parquet file
// (deltalog.ReadGenericRows).
func readGenericRows(fs vfs.FS, path string, fn func(map[string]any) error) error {
	return deltalog.ReadGenericRows(fs, path, fn)
}

// conform shapes a normalised value to a Delta type: struct fields missing
// from the file become nil (schema evolution), and numbers of the wrong
// width are widened.
func conform(t DataType, v any) any {
	if v == nil {
		if t.Struct != nil {
			return nil
		}
		return nil
	}
	switch {
	case t.Struct != nil:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(t.Struct.Fields))
		for _, f := range t.Struct.Fields {
			out[f.Name] = conform(f.Type, m[f.Name])
		}
		return out
	case t.Element != nil:
		s, ok := v.([]any)
		if !ok {
			return v
		}
		for i := range s {
			s[i] = conform(*t.Element, s[i])
		}
		return s
	case t.Key != nil:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for k := range m {
			m[k] = conform(*t.Value, m[k])
		}
		return m
	}
	switch t.Primitive {
	case "float":
		if f, ok := v.(float32); ok {
			return float64(f)
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
	}
	return v
}

// partitionValue converts a partitionValues string to the column's type.
// A nil pointer or an empty string is null.
func partitionValue(t DataType, s *string) (any, error) {
	if s == nil || *s == "" {
		return nil, nil
	}
	v := *s
	switch t.Primitive {
	case "string":
		return v, nil
	case "long", "integer", "short", "byte":
		return strconv.ParseInt(v, 10, 64)
	case "double", "float":
		return strconv.ParseFloat(v, 64)
	case "boolean":
		return strconv.ParseBool(v)
	case "date":
		return v, nil
	case "timestamp", "timestamp_ntz":
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999", "2006-01-02 15:04:05"} {
			if ts, err := time.Parse(layout, v); err == nil {
				return ts.UTC(), nil
			}
		}
		return nil, fmt.Errorf("partition timestamp %q", v)
	}
	if strings.HasPrefix(t.Primitive, "decimal") {
		return v, nil
	}
	return v, nil
}
