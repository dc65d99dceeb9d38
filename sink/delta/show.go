package delta

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Show formats.
const (
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"
)

// ShowTimeLayout renders timestamps in Show: RFC 3339 UTC with up to
// microsecond precision.
const ShowTimeLayout = "2006-01-02T15:04:05.999999Z07:00"

// ShowColumns returns the column names Show prints for a schema: the
// top-level fields, except that the sink's window struct is flattened to
// window_start and window_end.
func ShowColumns(s Schema) []string {
	var cols []string
	for _, f := range s.Fields {
		if isSinkWindow(f) {
			cols = append(cols, KeyWindowStart, KeyWindowEnd)
			continue
		}
		cols = append(cols, f.Name)
	}
	return cols
}

func isSinkWindow(f Field) bool {
	if f.Name != "window" || f.Type.Struct == nil || len(f.Type.Struct.Fields) != 2 {
		return false
	}
	a, b := f.Type.Struct.Fields[0], f.Type.Struct.Fields[1]
	return a.Name == "start" && b.Name == "end" && a.Type.Primitive == "timestamp" && b.Type.Primitive == "timestamp"
}

// CheckShowOptions refuses a format or version Show cannot take, looking at
// nothing else.
func CheckShowOptions(format string, version int64) error {
	if format != FormatCSV && format != FormatJSONL {
		return errcode.New(errcode.InvalidArgument, "", "use --format csv or --format jsonl", "unknown format %q", format)
	}
	if version < -1 {
		return errcode.New(errcode.InvalidArgument, "", "pass --version V with V >= 0 (table history lists the versions), or omit it for the latest",
			"--version %d is not a table version", version)
	}
	return nil
}

// Show writes every live row of the table at version (-1 = latest) to w
// (docs/contracts.md, CLI). csv: a header row, then one row per table row; nested values
// are JSON text and nulls are empty cells. jsonl: one JSON object per row,
// keys in column order, nested values as JSON values, nulls as null.
// Timestamps use ShowTimeLayout. Rows come in file order.
func Show(ctx context.Context, w io.Writer, path, format string, version int64) error {
	return ShowFS(ctx, w, vfs.Default, path, format, version)
}

// ShowFS is Show of the table at path in fs (an s3:// path in a storage.Mux).
func ShowFS(ctx context.Context, w io.Writer, fs vfs.FS, path, format string, version int64) error {
	if err := CheckShowOptions(format, version); err != nil {
		return err
	}
	t, err := OpenFS(ctx, fs, path)
	if err != nil {
		return err
	}
	s, err := t.Snapshot(ctx, version)
	if err != nil {
		return err
	}
	cols := ShowColumns(s.Schema)
	bw := bufio.NewWriterSize(w, 1<<16)
	cw := csv.NewWriter(bw)
	if format == FormatCSV {
		if err := cw.Write(cols); err != nil {
			return err
		}
	}
	vals := make([]any, len(cols))
	rec := make([]string, len(cols))
	emit := func() error {
		if format == FormatCSV {
			for j, v := range vals {
				rec[j] = csvCell(v)
			}
			return cw.Write(rec)
		}
		bw.WriteByte('{')
		for j, v := range vals {
			if j > 0 {
				bw.WriteByte(',')
			}
			k, _ := json.Marshal(cols[j])
			bw.Write(k)
			bw.WriteByte(':')
			js, err := json.Marshal(jsonValue(v))
			if err != nil {
				return err
			}
			bw.Write(js)
		}
		bw.WriteString("}\n")
		return nil
	}
	err = s.showRows(ctx, vals, emit)
	if err != nil {
		return err
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

// showRows sets vals to each live row's values, in ShowColumns order, and
// calls emit: decoded by column for the sink's tables, by the generic reader
// for any other.
func (s *Snapshot) showRows(ctx context.Context, vals []any, emit func() error) error {
	if l, err := s.scanLayout(); err == nil {
		return s.scanRows(ctx, l, func(rs *rowSet) error {
			for r := range rs.n {
				for c := range rs.cols {
					vals[c] = rs.value(c, r)
				}
				if err := emit(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return s.Rows(ctx, func(row map[string]any) error {
		i := 0
		for _, f := range s.Schema.Fields {
			v := row[f.Name]
			if isSinkWindow(f) {
				m, _ := v.(map[string]any)
				vals[i], vals[i+1] = m["start"], m["end"]
				i += 2
				continue
			}
			vals[i] = v
			i++
		}
		return emit()
	})
}

// value returns column c of row r for Show: time.Time (UTC), int64,
// float64, string as Rows would, and for the other types bool, float32,
// json.Number (a decimal's plain text), []byte (binary), dateText and
// localTime (a TIMESTAMP_NTZ); nil for a null.
func (rs *rowSet) value(c, r int) any {
	return cellValue(&rs.cols[c], rs.l.leaves[c].typ, r)
}

// cellValue is row r of column v of type t, as value describes (an
// array's elements as a []any of them).
func cellValue(v *stream.Column, t stream.Type, r int) any {
	if v.IsNull(r) {
		return nil
	}
	switch t.Kind() {
	case stream.Array:
		return arrayValue(v, t, r)
	case stream.Timestamp:
		return time.UnixMicro(v.Int64s[r]).UTC()
	case stream.TimestampNTZ:
		return localTime(v.Int64s[r])
	case stream.Float32:
		return float32(v.Float64s[r])
	case stream.Float64:
		return v.Float64s[r]
	case stream.String:
		return v.Strings[r]
	case stream.Binary:
		return []byte(v.Strings[r])
	case stream.Decimal:
		return json.Number(v.Decimals[r].Text(t.Scale()))
	case stream.Boolean:
		return v.Int64s[r] != 0
	case stream.Date:
		return dateText(time.Unix(v.Int64s[r]*86400, 0).UTC().Format(time.DateOnly))
	}
	return v.Int64s[r]
}

// jsonValue prepares a row value for encoding/json: timestamps as strings
// in ShowTimeLayout, recursively.
func jsonValue(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format(ShowTimeLayout)
	case localTime:
		return csvCell(x)
	case []byte:
		return base64.StdEncoding.EncodeToString(x) // as Spark's JSON writes binary
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	}
	return v
}

// localTime is a TIMESTAMP_NTZ value: shown without a zone.
type localTime int64

// dateText is a DATE value, shown as yyyy-MM-dd.
type dateText string

// ShowNTZLayout renders a TIMESTAMP_NTZ in Show: ShowTimeLayout without
// the zone.
const ShowNTZLayout = "2006-01-02T15:04:05.999999"

func csvCell(v any) string {
	switch x := v.(type) {
	case localTime:
		return time.UnixMicro(int64(x)).UTC().Format(ShowNTZLayout)
	case dateText:
		return string(x)
	case json.Number:
		return string(x)
	case []byte:
		return hexBytes(x)
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case time.Time:
		return x.UTC().Format(ShowTimeLayout)
	}
	js, err := json.Marshal(jsonValue(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(js)
}

// hexBytes renders a BINARY value as Spark's show() does: "[0A FF]".
func hexBytes(b []byte) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 0, 2+3*len(b))
	out = append(out, '[')
	for i, c := range b {
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(append(out, ']'))
}
