package pqcol

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/stream"
)

type row struct {
	ID     int64      `parquet:"id"`
	Small  *int32     `parquet:"small,optional"`
	F32    float32    `parquet:"f32"`
	F64    *float64   `parquet:"f64,optional"`
	Name   *string    `parquet:"Name,optional"`
	TsMs   time.Time  `parquet:"ts_ms,timestamp(millisecond)"`
	TsUs   *time.Time `parquet:"ts_us,optional,timestamp(microsecond)"`
	TsNs   time.Time  `parquet:"ts_ns,timestamp(nanosecond)"`
	Flag   bool       `parquet:"flag"`
	Amount int64      `parquet:"amount,decimal(2:18)"`
}

func writeRows(t *testing.T, rows []row, perGroup int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf, parquet.MaxRowsPerRowGroup(perGroup))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDecodeAgainstWritten writes random rows with parquet-go's writer
// (several row groups, nulls in the optional columns) and checks every
// decoded value against the rows written, column names matched
// case-insensitively and a missing column read as nulls.
func TestDecodeAgainstWritten(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 30; iter++ {
		n := r.IntN(200)
		rows := make([]row, n)
		base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		for i := range rows {
			x := &rows[i]
			x.ID = r.Int64() - r.Int64()
			if r.IntN(3) > 0 {
				v := int32(r.Uint32())
				x.Small = &v
			}
			x.F32 = float32(r.NormFloat64())
			if r.IntN(3) > 0 {
				v := r.NormFloat64() * 1e6
				x.F64 = &v
			}
			if r.IntN(3) > 0 {
				v := string(rune('a' + r.IntN(26)))
				x.Name = &v
			}
			x.TsMs = base.Add(time.Duration(r.Int64N(1e15)) * time.Millisecond / 1e6).Truncate(time.Millisecond)
			if r.IntN(2) > 0 {
				v := base.Add(-time.Duration(r.Int64N(1e12)) * time.Microsecond).UTC()
				x.TsUs = &v
			}
			x.TsNs = base.Add(time.Duration(r.Int64N(1e18)))
		}
		data := writeRows(t, rows, int64(1+r.IntN(50)))
		cols := []Column{{"ID", stream.Int64}, {"small", stream.Int64}, {"f32", stream.Float64}, {"f64", stream.Float64},
			{"name", stream.String}, {"ts_ms", stream.Timestamp}, {"ts_us", stream.Timestamp}, {"ts_ns", stream.Timestamp}, {"absent", stream.String}}
		bs, err := Decode(bytes.NewReader(data), int64(len(data)), cols)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for _, b := range bs {
			if err := b.Validate(); err != nil {
				t.Fatal(err)
			}
			for k := 0; k < b.Len; k, i = k+1, i+1 {
				x := rows[i]
				c := b.Columns
				check := func(name string, ok bool) {
					if !ok {
						t.Fatalf("iter %d row %d column %s: decoded %+v, wrote %+v", iter, i, name, b.Columns, x)
					}
				}
				check("id", c[0].Int64s[k] == x.ID && !c[0].IsNull(k))
				check("small", (x.Small == nil) == c[1].IsNull(k) && (x.Small == nil || c[1].Int64s[k] == int64(*x.Small)))
				check("f32", c[2].Float64s[k] == float64(x.F32))
				check("f64", (x.F64 == nil) == c[3].IsNull(k) && (x.F64 == nil || c[3].Float64s[k] == *x.F64))
				check("name", (x.Name == nil) == c[4].IsNull(k) && (x.Name == nil || c[4].Strings[k] == *x.Name))
				check("ts_ms", c[5].Int64s[k] == x.TsMs.UnixMicro())
				check("ts_us", (x.TsUs == nil) == c[6].IsNull(k) && (x.TsUs == nil || c[6].Int64s[k] == x.TsUs.UnixMicro()))
				check("ts_ns", c[7].Int64s[k] == x.TsNs.UnixMicro())
				check("absent", c[8].IsNull(k))
			}
		}
		if i != n {
			t.Fatalf("decoded %d rows, wrote %d", i, n)
		}
	}
}

func TestDecodeRefusals(t *testing.T) {
	data := writeRows(t, []row{{ID: 1}}, 10)
	for _, c := range []Column{{"name", stream.Int64}, {"id", stream.Timestamp}, {"ts_ms", stream.Int64}, {"amount", stream.Int64}} {
		_, err := Decode(bytes.NewReader(data), int64(len(data)), []Column{c})
		if !errors.Is(err, ErrTypeMismatch) {
			t.Errorf("%v: %v, want a type mismatch", c, err)
		}
	}
	if _, err := Decode(bytes.NewReader(data[:20]), 20, nil); err == nil {
		t.Fatal("truncated file decoded")
	}
}

// TestSchemaTypes: every leaf reads as Spark's type of it (booleans and
// decimals were refused before the engine had their columns), and the
// values decode.
func TestSchemaTypes(t *testing.T) {
	data := writeRows(t, []row{{ID: 1, Flag: true, Amount: -12345}, {ID: 2, Amount: 7}}, 10)
	fields, err := Schema(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fields {
		got = append(got, f.Name+" "+f.Type.String())
	}
	want := "id int64, small int, f32 float, f64 float64, Name string, ts_ms timestamp, ts_us timestamp, ts_ns timestamp, flag boolean, amount decimal(18,2)"
	if strings.Join(got, ", ") != want {
		t.Fatalf("schema %s, want %s", strings.Join(got, ", "), want)
	}
	bs, err := Decode(bytes.NewReader(data), int64(len(data)), []Column{{"flag", stream.Boolean}, {"amount", stream.DecimalOf(18, 2)}, {"amount", stream.DecimalOf(20, 4)}})
	if err != nil {
		t.Fatal(err)
	}
	c := bs[0].Columns
	if c[0].Int64s[0] != 1 || c[0].Int64s[1] != 0 || c[1].Decimals[0].Text(2) != "-123.45" || c[1].Decimals[1].Text(2) != "0.07" ||
		c[2].Decimals[0].Text(4) != "-123.4500" {
		t.Fatalf("decoded %+v", c)
	}
	if _, err := Decode(bytes.NewReader(data), int64(len(data)), []Column{{"amount", stream.DecimalOf(18, 1)}}); !errors.Is(err, ErrTypeMismatch) {
		t.Fatalf("decimal(18,2) read as decimal(18,1): %v", err)
	}
}

type window struct {
	Start time.Time `parquet:"start,timestamp(microsecond)"`
	End   time.Time `parquet:"end,timestamp(microsecond)"`
}

type nestedRow struct {
	Window *window `parquet:"window,optional"`
	Miner  string  `parquet:"miner"`
	Count  int64   `parquet:"count"`
}

// TestDecodeStructFields reads the leaves of a struct column by dotted
// path (the Delta sink's window<start, end>), null where the struct is.
func TestDecodeStructFields(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := []nestedRow{{Window: &window{t0, t0.Add(time.Hour)}, Miner: "a", Count: 3}, {Miner: "b", Count: 4},
		{Window: &window{t0.Add(time.Hour), t0.Add(2 * time.Hour)}, Miner: "c", Count: 5}}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[nestedRow](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	bs, err := Decode(bytes.NewReader(data), int64(len(data)), []Column{{"count", stream.Int64}, {"Window.End", stream.Timestamp}, {"miner", stream.String}, {"window.start", stream.Timestamp}})
	if err != nil {
		t.Fatal(err)
	}
	b := bs[0]
	for i, x := range rows {
		if b.Columns[0].Int64s[i] != x.Count || b.Columns[2].Strings[i] != x.Miner || b.Columns[1].IsNull(i) != (x.Window == nil) ||
			(x.Window != nil && (b.Columns[1].Int64s[i] != x.Window.End.UnixMicro() || b.Columns[3].Int64s[i] != x.Window.Start.UnixMicro())) {
			t.Fatalf("row %d: %+v", i, b.Columns)
		}
	}
	if _, err := Decode(bytes.NewReader(data), int64(len(data)), []Column{{"window", stream.Timestamp}}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a group: %v", err)
	}
}
