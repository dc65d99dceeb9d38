package columnar

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/internal/fixture"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// oracleField is a leaf the oracle reads, with the engine type it maps to.
type oracleField struct {
	Field
	leaf  int
	node  parquet.Node
	scale int32
}

// engineFields maps every flat leaf of a file with an engine type to a
// field: timestamps (INT64 annotated, INT96) as Timestamp, decimals and
// floating point as Float64, other integers as Int64, byte arrays as String.
func engineFields(s *parquet.Schema) []oracleField {
	var out []oracleField
	for _, path := range s.Columns() {
		lc, ok := s.Lookup(path...)
		if !ok || lc.MaxRepetitionLevel > 0 {
			continue
		}
		t := lc.Node.Type()
		el := NodeElement(lc.Node)
		f := oracleField{Field: Field{Name: strings.Join(path, "."), Path: path}, leaf: lc.ColumnIndex, node: lc.Node}
		if IsDecimal(el) {
			f.Type, f.scale = stream.Float64, DecimalScale(el)
		} else {
			switch t.Kind() {
			case parquet.Int96:
				f.Type = stream.Timestamp
			case parquet.Int64:
				f.Type = stream.Int64
				if ts, ok := TimestampOf(el); ok && ts.Unit != Infer {
					f.Type = stream.Timestamp
				}
			case parquet.Int32:
				f.Type = stream.Int64
			case parquet.Float, parquet.Double:
				f.Type = stream.Float64
			case parquet.ByteArray:
				f.Type = stream.String
			default:
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

// oracleValue converts one value as an independent reader would: time
// through package time, decimals through math/big, the rest as parquet-go's
// row reader gives them.
func oracleValue(f oracleField, v parquet.Value) (any, error) {
	if v.IsNull() {
		return nil, nil
	}
	switch f.Type {
	case stream.Timestamp:
		if v.Kind() == parquet.Int96 {
			x := v.Int96()
			nanos := int64(uint64(x[1])<<32 | uint64(x[0]))
			day := time.Date(-4713, time.November, 24, 12, 0, 0, 0, time.UTC).AddDate(0, 0, int(x[2])) // Julian day 0 starts at noon
			return day.Add(-12 * time.Hour).Add(time.Duration(nanos)).UnixMicro(), nil
		}
		i := v.Int64()
		// The unit as parquet-go prints the type: independent of the
		// decoder's reading of the annotations.
		switch typ := f.node.Type().String(); {
		case strings.Contains(typ, "MILLIS"):
			return time.UnixMilli(i).UnixMicro(), nil
		case strings.Contains(typ, "NANOS"):
			return time.Unix(0, i).UnixMicro(), nil
		}
		return i, nil
	case stream.Float64:
		if f.scale > 0 || IsDecimal(NodeElement(f.node)) {
			var unscaled big.Int
			switch v.Kind() {
			case parquet.Int32:
				unscaled.SetInt64(int64(v.Int32()))
			case parquet.Int64:
				unscaled.SetInt64(v.Int64())
			default:
				b := v.ByteArray()
				unscaled.SetBytes(b)
				if len(b) > 0 && b[0]&0x80 != 0 { // two's complement
					unscaled.Sub(&unscaled, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
				}
			}
			r := new(big.Rat).SetFrac(&unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(f.scale)), nil))
			x, _ := r.Float64()
			return x, nil
		}
		if v.Kind() == parquet.Float {
			return float64(v.Float()), nil
		}
		return v.Double(), nil
	case stream.String:
		return string(v.ByteArray()), nil
	}
	if v.Kind() == parquet.Int32 {
		return int64(v.Int32()), nil
	}
	return v.Int64(), nil
}

func engineValue(c *stream.Column, r int) any {
	if c.IsNull(r) {
		return nil
	}
	switch c.Type {
	case stream.Float64:
		return c.Float64s[r]
	case stream.String:
		return c.Strings[r]
	}
	return c.Int64s[r]
}

func same(a, b any) bool {
	if x, ok := a.(float64); ok {
		y, ok := b.(float64)
		// A decimal's double: the decoder divides in float64, the oracle
		// rounds exactly; they may differ in the last bit.
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y) || math.Abs(x-y) <= 1e-15*math.Max(math.Abs(x), math.Abs(y)))
	}
	return a == b
}

// checkFile decodes every mappable leaf of the file through Open and
// DecodeRowGroup and compares each value with parquet-go's generic row
// reader converted by the oracle; it returns the values compared.
func checkFile(t *testing.T, name string, data []byte) int {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ofs := engineFields(pf.Schema())
	if len(ofs) == 0 {
		return 0
	}
	fields := make([]Field, len(ofs))
	for i, f := range ofs {
		fields[i] = f.Field
	}
	dec, err := Open(pf, fields, map[string]string{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	compared := 0
	for g, rg := range pf.RowGroups() {
		got, err := dec.DecodeRowGroup(g)
		if err != nil {
			t.Fatalf("%s row group %d: %v", name, g, err)
		}
		if err := got.Batch.Validate(); err != nil {
			t.Fatalf("%s row group %d: %v", name, g, err)
		}
		rows := rg.Rows()
		buf := make([]parquet.Row, 128)
		r := 0
		for {
			n, rerr := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				byLeaf := map[int]parquet.Value{}
				for _, v := range row {
					byLeaf[v.Column()] = v
				}
				for i, f := range ofs {
					want, err := oracleValue(f, byLeaf[f.leaf])
					if err != nil {
						t.Fatal(err)
					}
					if v := engineValue(&got.Batch.Columns[i], r); !same(v, want) {
						t.Fatalf("%s row group %d row %d column %s (%v): decoder %v, oracle %v", name, g, r, f.Name, f.Type, v, want)
					}
					compared++
				}
				r++
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				t.Fatalf("%s: %v", name, rerr)
			}
		}
		rows.Close()
		if r != got.Batch.Len {
			t.Fatalf("%s row group %d: decoder %d rows, oracle %d", name, g, got.Batch.Len, r)
		}
	}
	return compared
}

// TestDecodeGoldenFiles reads every Parquet file of the Delta golden tables
// (written by Delta Spark and delta-rs: INT96 and INT64 timestamps of each
// unit, decimals of every physical type, nested structs, nulls, dictionary
// and plain pages) through the decoder and checks each value against
// parquet-go's generic row reader.
func TestDecodeGoldenFiles(t *testing.T) {
	root := fixture.Shared(t, "delta-golden")
	var files []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.Contains(p, "_delta_log") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 20 {
		t.Fatalf("%d golden Parquet files: the fixture is not what the test was written for", len(files))
	}
	compared, kinds := 0, map[string]bool{}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			continue // a deliberately damaged file of a golden table
		}
		for _, f := range engineFields(pf.Schema()) {
			kinds[fmt.Sprintf("%v/%v", f.Type, f.node.Type())] = true
		}
		rel, _ := filepath.Rel(root, p)
		compared += checkFile(t, rel, data)
	}
	t.Logf("%d files, %d values compared, leaf kinds %d", len(files), compared, len(kinds))
	for _, want := range []string{"timestamp/INT96", "float64/DECIMAL(8,5)", "int64/INT32"} {
		if !kinds[want] {
			t.Errorf("no golden file has a %s leaf: the test lost its coverage (kinds: %v)", want, kinds)
		}
	}
}

// TestDecodeWrittenFiles writes files with every timestamp unit, INT96,
// decimals of each physical type, nulls and dictionary pages, and checks the
// decoder against the oracle.
func TestDecodeWrittenFiles(t *testing.T) {
	type row struct {
		Millis  int64   `parquet:"millis,timestamp(millisecond)"`
		Micros  *int64  `parquet:"micros,optional,timestamp(microsecond)"`
		Nanos   int64   `parquet:"nanos,timestamp(nanosecond)"`
		Dec32   int32   `parquet:"dec32,decimal(2:9)"`
		Dec64   *int64  `parquet:"dec64,optional,decimal(3:18)"`
		DecBin  []byte  `parquet:"decbin,decimal(4:30)"`
		Miner   string  `parquet:"miner,dict"`
		Gas     *int64  `parquet:"gas,optional"`
		Ratio   float32 `parquet:"ratio"`
		Note    *string `parquet:"note,optional"`
		Counter int32   `parquet:"counter"`
	}
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([]row, 3000)
	for i := range rows {
		ns := r.Int64N(4e18) - 2e18
		rows[i] = row{Millis: r.Int64N(4e12) - 2e12, Nanos: ns, Dec32: int32(r.IntN(2e9) - 1e9),
			Miner: fmt.Sprintf("0x%02x", r.IntN(40)), Ratio: r.Float32(), Counter: int32(i)}
		if i%3 != 0 {
			rows[i].Micros = new(int64)
			*rows[i].Micros = r.Int64N(4e15) - 2e15
			g := r.Int64N(30_000_000)
			rows[i].Gas = &g
			d := r.Int64N(1e17) - 5e16
			rows[i].Dec64 = &d
		}
		if i%7 == 0 {
			s := fmt.Sprint("note ", i)
			rows[i].Note = &s
		}
		b := big.NewInt(r.Int64N(1e15)) // the unscaled value within int64, as the decoder requires
		b.Mul(b, big.NewInt(int64(r.IntN(1000)-500)))
		rows[i].DecBin = twosComplement(b, 13) // decimal(30) is FIXED_LEN_BYTE_ARRAY(13)
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf, parquet.PageBufferSize(4096))
	for i := 0; i < len(rows); i += 1000 {
		if _, err := w.Write(rows[i : i+1000]); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := checkFile(t, "written", buf.Bytes()); n != 3000*11 {
		t.Fatalf("compared %d values, want %d", n, 3000*11)
	}
}

// twosComplement is b as an n-byte big-endian two's complement.
func twosComplement(b *big.Int, n int) []byte {
	if b.Sign() >= 0 {
		out := make([]byte, n)
		return b.FillBytes(out)
	}
	m := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), uint(8*n)), b)
	return m.FillBytes(make([]byte, n))
}

// TestTimestampRules pins the table's conversions.
func TestTimestampRules(t *testing.T) {
	el := func(unit format.TimeUnit) *format.SchemaElement {
		e := &format.SchemaElement{}
		e.Type.V, e.Type.Valid = format.Int64, true
		e.LogicalType.Value = &format.TimestampType{IsAdjustedToUTC: true, Unit: unit}
		return e
	}
	for _, c := range []struct {
		el   *format.SchemaElement
		in   int64
		want int64
	}{
		{el(format.TimeUnit{Value: &format.MilliSeconds{}}), -1, -1000},
		{el(format.TimeUnit{Value: &format.MicroSeconds{}}), 7, 7},
		{el(format.TimeUnit{Value: &format.NanoSeconds{}}), -1500, -2},
		{el(format.TimeUnit{Value: &format.NanoSeconds{}}), 1500, 1},
	} {
		ts, ok := TimestampOf(c.el)
		if !ok || ts.Micros(c.in) != c.want {
			t.Errorf("%v of %d: %d, want %d", c.el.LogicalType.Value, c.in, ts.Micros(c.in), c.want)
		}
	}
	var unannotated format.SchemaElement
	unannotated.Type.V, unannotated.Type.Valid = format.Int64, true
	ts, _ := TimestampOf(&unannotated)
	for in, want := range map[int64]int64{1_700_000_000: 1_700_000_000_000_000, 1_700_000_000_000: 1_700_000_000_000_000,
		1_700_000_000_000_000: 1_700_000_000_000_000, 1_700_000_000_000_000_000: 1_700_000_000_000_000} {
		if got := ts.Micros(in); got != want {
			t.Errorf("unannotated %d: %d, want %d", in, got, want)
		}
	}
	if got := Int96Micros(deprecated.Int96{0, 0, julianUnixEpoch + 1}); got != 86_400_000_000 {
		t.Errorf("INT96 of day 1: %d", got)
	}
}

// TestDecodeParents: for a leaf of an optional struct, RowGroup.Parents
// tells a null struct (false) from a struct whose leaf is null (true).
func TestDecodeParents(t *testing.T) {
	type window struct {
		Start *int64 `parquet:"start,optional,timestamp(microsecond)"`
	}
	type row struct {
		Window *window `parquet:"window,optional"`
		N      int64   `parquet:"n"`
	}
	one := int64(5)
	rows := []row{{Window: &window{Start: &one}}, {Window: nil, N: 1}, {Window: &window{}, N: 2}}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Open(pf, []Field{{Name: "ws", Path: []string{"window", "start"}, Type: stream.Timestamp, Parent: true}, {Name: "n", Type: stream.Int64}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rg, err := dec.DecodeRowGroup(0)
	if err != nil {
		t.Fatal(err)
	}
	ws := &rg.Batch.Columns[0]
	if got := fmt.Sprint(rg.Parents[0], ws.Valid, ws.Int64s[0]); got != "[true false true] [true false false] 5" {
		t.Fatalf("parents, valid, first: %s", got)
	}
	if rg.Parents[1] != nil {
		t.Fatalf("a top-level column has parents %v", rg.Parents[1])
	}
}

// TestDecodeDictView: a string column whose chunk is all dictionary pages
// comes with its stream.Dict view (checked row by row by Validate: each
// row's string is its dictionary value's, a null's index -1), through a
// Pool whose recycled indexes the next row group overwrites; a column of
// plain pages has none.
func TestDecodeDictView(t *testing.T) {
	type row struct {
		Miner string  `parquet:"miner,dict"`
		Note  *string `parquet:"note,optional,dict"`
		Plain string  `parquet:"plain"`
	}
	r := rand.New(rand.NewPCG(5, 6))
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf, parquet.PageBufferSize(512))
	for g := range 4 {
		rows := make([]row, 700+g*100)
		for i := range rows {
			rows[i] = row{Miner: fmt.Sprintf("0x%02x", r.IntN(40)), Plain: fmt.Sprint("p", r.IntN(1000))}
			if r.IntN(3) > 0 {
				s := fmt.Sprint("note ", r.IntN(9))
				rows[i].Note = &s
			}
		}
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	checkFile(t, "dict", data)
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Open(pf, []Field{{Name: "miner", Type: stream.String}, {Name: "note", Type: stream.String}, {Name: "plain", Type: stream.String}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := &Pool{}
	dec.UsePool(pool)
	for g := range pf.RowGroups() {
		rg, err := dec.DecodeRowGroup(g)
		if err != nil {
			t.Fatal(err)
		}
		b := rg.Batch
		if err := b.Validate(); err != nil {
			t.Fatalf("row group %d: %v", g, err)
		}
		if b.Columns[0].Dict == nil || b.Columns[1].Dict == nil {
			t.Fatalf("row group %d: dictionary columns without a view: %v, %v", g, b.Columns[0].Dict, b.Columns[1].Dict)
		}
		if b.Columns[2].Dict != nil {
			t.Fatalf("row group %d: a plain column has a view", g)
		}
		if len(b.Columns[0].Dict.Values) > 40 {
			t.Fatalf("row group %d: %d dictionary values for 40 miners", g, len(b.Columns[0].Dict.Values))
		}
		pool.Put(b)
	}
}
