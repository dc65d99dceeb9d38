package deltasource

import (
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/internal/duckref"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// wideDecimals are the columns of TestWideDecimalTable with the
// FIXED_LEN_BYTE_ARRAY length Spark writes for each
// (Decimal.minBytesForPrecision: 9, 12 and 16 bytes).
var wideDecimals = []struct {
	name   string
	p, s   int
	length int
}{{"d20", 20, 2, 9}, {"d28", 28, 4, 12}, {"d38", 38, 0, 16}}

// wideText is the plain text of the unscaled value u at scale s.
func wideText(u *big.Int, s int) string {
	if s == 0 {
		return u.String()
	}
	digits := new(big.Int).Abs(u).String()
	for len(digits) <= s {
		digits = "0" + digits
	}
	sign := ""
	if u.Sign() < 0 {
		sign = "-"
	}
	return sign + digits[:len(digits)-s] + "." + digits[len(digits)-s:]
}

// TestWideDecimalTable writes DECIMAL(20,2), DECIMAL(28,4) and
// DECIMAL(38,0) columns (the extremes ±(10^p - 1), negatives, zero, a null)
// through the Delta sink, then checks the data file with parquet-go's own
// row reader (the FIXED_LEN_BYTE_ARRAY length Spark writes and each
// big-endian two's complement value, decoded here with math/big), the
// per-file min/max stats, the read back through this source and, with
// -duckref, DuckDB's reading of the file.
func TestWideDecimalTable(t *testing.T) {
	dir := t.TempDir()
	schema := stream.Schema{Key: []string{"k"}, Fields: []stream.Field{{Name: "k", Type: stream.Int64}}}
	for _, c := range wideDecimals {
		schema.Fields = append(schema.Fields, stream.Field{Name: c.name, Type: stream.DecimalOf(c.p, c.s), Nullable: true})
	}
	// Unscaled values per row, nil for null; row k of every column.
	unscaled := func(p int) []*big.Int {
		top := new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil), big.NewInt(1))
		return []*big.Int{top, new(big.Int).Neg(top), big.NewInt(0), big.NewInt(-1), big.NewInt(-123456789), big.NewInt(987654321), nil}
	}
	rows := len(unscaled(1))
	b := &stream.Batch{Len: rows, Columns: []stream.Column{stream.MakeColumn("k", stream.Int64, rows, rows)}}
	for r := range rows {
		b.Columns[0].Int64s[r] = int64(r)
	}
	want := make([][]string, rows) // want[r] is row r as "k|d20|d28|d38"
	for r := range rows {
		want[r] = []string{fmt.Sprint(r)}
	}
	for _, c := range wideDecimals {
		col := stream.MakeColumn(c.name, stream.DecimalOf(c.p, c.s), rows, rows)
		col.Valid = make([]bool, rows)
		for r, u := range unscaled(c.p) {
			if u == nil {
				want[r] = append(want[r], "null")
				continue
			}
			d, ok := stream.Dec128FromBig(u)
			if !ok {
				t.Fatalf("%s: %s does not fit", c.name, u)
			}
			col.Decimals[r], col.Valid[r] = d, true
			want[r] = append(want[r], wideText(u, c.s))
		}
		b.Columns = append(b.Columns, col)
	}
	wantRows := make([]string, rows)
	for r := range rows {
		wantRows[r] = strings.Join(want[r], "|")
	}
	slices.Sort(wantRows)

	sink, err := delta.NewMergeSink(delta.SinkOptions{Path: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := sink.Open(t.Context(), stream.SinkEnv{QueryID: "q1", Schema: schema, Locked: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.AddBatch(t.Context(), 0, b); err != nil {
		t.Fatal(err)
	}

	// The data file through parquet-go's reader, not ours.
	files, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil || len(files) != 1 {
		t.Fatalf("data files %v %v", files, err)
	}
	fh, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range wideDecimals {
		leaf := pf.Schema().Fields()[1+i]
		if got := leaf.Type().Length(); leaf.Type().Kind() != parquet.FixedLenByteArray || got != c.length {
			t.Errorf("%s: %s of length %d, want FIXED_LEN_BYTE_ARRAY(%d)", c.name, leaf.Type().Kind(), got, c.length)
		}
		if w := fmt.Sprintf("optional fixed_len_byte_array(%d) %s (DECIMAL(%d,%d))", c.length, c.name, c.p, c.s); !strings.Contains(pf.Schema().String(), w) {
			t.Errorf("parquet schema lacks %q:\n%s", w, pf.Schema())
		}
	}
	var got []string
	rr := parquet.NewReader(pf)
	defer rr.Close()
	buf := make([]parquet.Row, rows+1)
	n, err := rr.ReadRows(buf)
	if n != rows {
		t.Fatalf("parquet-go read %d rows (%v), want %d", n, err, rows)
	}
	for _, row := range buf[:n] {
		parts := []string{fmt.Sprint(row[0].Int64())}
		for i, c := range wideDecimals {
			v := row[1+i]
			if v.IsNull() {
				parts = append(parts, "null")
				continue
			}
			raw := v.ByteArray()
			if len(raw) != c.length {
				t.Errorf("%s: a %d-byte value, want %d", c.name, len(raw), c.length)
			}
			u := new(big.Int).SetBytes(raw)
			if len(raw) > 0 && raw[0]&0x80 != 0 { // two's complement
				u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(raw))))
			}
			parts = append(parts, wideText(u, c.s))
		}
		got = append(got, strings.Join(parts, "|"))
	}
	slices.Sort(got)
	if !slices.Equal(got, wantRows) {
		t.Errorf("parquet-go read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantRows, "\n"))
	}

	// Delta's stats: min/max of each column as plain numbers at its scale.
	tbl, err := delta.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(t.Context(), -1)
	if err != nil || len(snap.Files()) != 1 {
		t.Fatalf("snapshot: %v", err)
	}
	stats := snap.Files()[0].Stats
	for _, c := range wideDecimals {
		top := unscaled(c.p)[0]
		for _, w := range []string{`"minValues":{.*"` + c.name + `":` + wideText(new(big.Int).Neg(top), c.s),
			`"maxValues":{.*"` + c.name + `":` + wideText(top, c.s)} {
			key, val, _ := strings.Cut(w, `.*`)
			i := strings.Index(stats, key)
			if i < 0 || !strings.Contains(stats[i:], val+",") && !strings.Contains(stats[i:], val+"}") {
				t.Errorf("stats lack %s: %s", w, stats)
			}
		}
	}

	// This source's read back.
	s := open(t, dir, "", nil)
	bs, _, err := drain(t, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := allRows(bs); !slices.Equal(got, wantRows) {
		t.Errorf("source read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantRows, "\n"))
	}

	bin := duckref.Optional(t)
	if bin == "" {
		return
	}
	var duck []string
	for _, fields := range duckref.Table(t, bin, files[0], "SELECT k, d20::VARCHAR, d28::VARCHAR, d38::VARCHAR FROM t ORDER BY k")[1:] {
		for i, f := range fields {
			if f == "" {
				fields[i] = "null"
			}
		}
		duck = append(duck, strings.Join(fields, "|"))
	}
	slices.Sort(duck)
	if !slices.Equal(duck, wantRows) {
		t.Errorf("DuckDB read\n%s\nwant\n%s", strings.Join(duck, "\n"), strings.Join(wantRows, "\n"))
	}
}
