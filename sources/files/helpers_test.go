package files

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/stream"
)

// order is a row of the test files.
type order struct {
	OrderID   *string   `parquet:"order_id,optional"`
	Amount    float64   `parquet:"amount"`
	EventTime time.Time `parquet:"event_time,timestamp(microsecond)"`
	Qty       *int32    `parquet:"qty,optional"`
}

func strp(s string) *string { return &s }
func i32p(v int32) *int32   { return &v }

// writeParquetFile writes rows with parquet-go's writer at dir/rel.
func writeParquetFile(t *testing.T, dir, rel string, rows []order) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[order](f, parquet.MaxRowsPerRowGroup(3))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, dir, rel, text string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// touch sets a file's modification time (admission is by time, then URI).
func touch(t *testing.T, dir, rel string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(rel)), at, at); err != nil {
		t.Fatal(err)
	}
}

// orderRow renders a written order as rowString renders a read one.
func orderRow(o order, region string) string {
	id, qty := "null", "null"
	if o.OrderID != nil {
		id = *o.OrderID
	}
	if o.Qty != nil {
		qty = strconv.Itoa(int(*o.Qty))
	}
	r := "null"
	if region != "" {
		r = region
	}
	return fmt.Sprintf("%s|%s|%s|%s|%s", id, fmtFloat(o.Amount), o.EventTime.UTC().Format(time.RFC3339Nano), qty, r)
}

func fmtFloat(f float64) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// rowString renders row i of b: values "|"-joined in column order,
// timestamps as RFC 3339, nulls as "null".
func rowString(b *stream.Batch, i int) string {
	var parts []string
	for _, c := range b.Columns {
		if c.IsNull(i) {
			parts = append(parts, "null")
			continue
		}
		switch c.Type.Kind() {
		case stream.Timestamp, stream.TimestampNTZ:
			parts = append(parts, time.UnixMicro(c.Int64s[i]).UTC().Format(time.RFC3339Nano))
		case stream.Date:
			parts = append(parts, time.Unix(c.Int64s[i]*86400, 0).UTC().Format(time.DateOnly))
		case stream.Decimal:
			parts = append(parts, c.Decimals[i].Text(c.Type.Scale()))
		case stream.Boolean:
			parts = append(parts, strconv.FormatBool(c.Int64s[i] != 0))
		case stream.Float64, stream.Float32:
			parts = append(parts, fmtFloat(c.Float64s[i]))
		case stream.String, stream.Binary:
			parts = append(parts, c.Strings[i])
		default:
			parts = append(parts, strconv.FormatInt(c.Int64s[i], 10))
		}
	}
	return strings.Join(parts, "|")
}

func fileLoc(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// testEnv is a source env over a fresh in-memory checkpoint.
func testEnv(t *testing.T) stream.SourceEnv {
	t.Helper()
	fs := vfs.NewMem()
	dir := "/ckpt/sources/orders"
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return stream.SourceEnv{Name: "orders", FS: fs, MetadataDir: dir}
}

func mustSource(t *testing.T, format, uri string) *Source {
	t.Helper()
	s, err := NewFromURI(format, uri, false)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drain runs triggers from start until the source has no new data,
// returning each batch's rows (sorted within a batch only when sortRows)
// and the last end offset.
func drain(t *testing.T, s *Source, start stream.Offset) ([][]string, stream.Offset) {
	t.Helper()
	var out [][]string
	for {
		end, err := s.LatestOffset(t.Context(), start)
		if err != nil {
			t.Fatal(err)
		}
		if string(end) == string(start) {
			return out, start
		}
		var rows []string
		if err := s.ReadBatch(t.Context(), start, end, func(b *stream.Batch) error {
			if err := b.Validate(); err != nil {
				return err
			}
			for i := 0; i < b.Len; i++ {
				rows = append(rows, rowString(b, i))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		out = append(out, rows)
		start = end
	}
}

func flat(bs [][]string) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b...)
	}
	slices.Sort(out)
	return out
}
