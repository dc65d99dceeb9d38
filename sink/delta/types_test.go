package delta

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/stream"
)

// typedSchema is an output of every scalar type, keyed by an INT column.
func typedSchema() stream.Schema {
	return stream.Schema{Key: []string{"k"}, Fields: []stream.Field{
		{Name: "k", Type: stream.Int32}, {Name: "b", Type: stream.Boolean, Nullable: true}, {Name: "i8", Type: stream.Int8, Nullable: true},
		{Name: "i16", Type: stream.Int16, Nullable: true}, {Name: "i64", Type: stream.Int64, Nullable: true},
		{Name: "f32", Type: stream.Float32, Nullable: true}, {Name: "f64", Type: stream.Float64, Nullable: true},
		{Name: "d9", Type: stream.DecimalOf(9, 2), Nullable: true}, {Name: "d18", Type: stream.DecimalOf(18, 4), Nullable: true},
		{Name: "d38", Type: stream.DecimalOf(38, 10), Nullable: true}, {Name: "s", Type: stream.String, Nullable: true},
		{Name: "bin", Type: stream.Binary, Nullable: true}, {Name: "day", Type: stream.Date, Nullable: true},
		{Name: "ts", Type: stream.Timestamp, Nullable: true}, {Name: "ntz", Type: stream.TimestampNTZ, Nullable: true}}}
}

// typedBatch holds rows k = keys of typedSchema: row values derived from
// k and gen (so a second batch's MERGE changes every value), the last row
// all null but its key.
func typedBatch(keys []int64, gen int64) *stream.Batch {
	s := typedSchema()
	b := &stream.Batch{Len: len(keys)}
	for _, f := range s.Fields {
		b.Columns = append(b.Columns, stream.MakeColumn(f.Name, f.Type, len(keys), len(keys)))
	}
	big, _ := stream.ParseDecimal("-1234567890123456789012345678.0123456789", 38, 10)
	for r, k := range keys {
		x := k*10 + gen
		c := b.Columns
		c[0].Int64s[r] = k
		c[1].Int64s[r] = x % 2
		c[2].Int64s[r] = x%256 - 128
		c[3].Int64s[r] = -x * 100
		c[4].Int64s[r] = x << 40
		c[5].Float64s[r] = float64(float32(x) / 3)
		c[6].Float64s[r] = float64(x) / 7
		c[7].Decimals[r] = stream.Dec128Of(-x * 12345)
		c[8].Decimals[r] = stream.Dec128Of(x * 1_000_000_000_007)
		c[9].Decimals[r], _ = big.Add(stream.Dec128Of(x))
		c[10].Strings[r] = strings.Repeat("é", int(x%40))
		c[11].Strings[r] = string([]byte{0, byte(x), 0xff})
		c[12].Int64s[r] = 19000 + x
		c[13].Int64s[r] = 1_700_000_000_000_000 + x*1001
		c[14].Int64s[r] = -86_400_000_000 + x
	}
	last := len(keys) - 1
	for i := 1; i < len(b.Columns); i++ {
		b.Columns[i].Valid = make([]bool, len(keys))
		for r := range last {
			b.Columns[i].Valid[r] = true
		}
	}
	return b
}

// TestTypedTableRoundTrip writes every scalar type through the MERGE sink
// (a first batch, then one that updates half its keys and adds others),
// and reads the table back through the column decoder: every value as
// written last, the schema and protocol Spark writes (timestampNtz needs
// reader 3 / writer 7), the Parquet types Spark writes, and Delta's stats.
func TestTypedTableRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := NewMergeSink(SinkOptions{Schema: typedSchema(), Path: dir, Logger: quietLog})
	closeAtEnd(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q"}); err != nil {
		t.Fatal(err)
	}
	first, second := typedBatch([]int64{1, 2, 3, 4}, 0), typedBatch([]int64{3, 4, 5, 6}, 1)
	for id, b := range []*stream.Batch{first, second} {
		if _, err := s.AddBatch(ctx, int64(id), b); err != nil {
			t.Fatal(err)
		}
	}
	// Expected: keys 1, 2 of the first batch, 3..6 of the second.
	want := map[int64]string{}
	for _, b := range []*stream.Batch{first, second} {
		for r := range b.Len {
			want[b.Columns[0].Int64s[r]] = rowText(b, r)
		}
	}
	tbl, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	if err := snap.Scan(ctx, func(b *stream.Batch) error {
		for r := range b.Len {
			got[b.Columns[0].Int64s[r]] = rowText(b, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("key %d:\n got %s\nwant %s", k, got[k], w)
		}
	}
	log0, err := os.ReadFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["timestampNtz"],"writerFeatures":["timestampNtz"]}}`,
		`\"name\":\"k\",\"type\":\"integer\"`, `\"type\":\"boolean\"`, `\"type\":\"byte\"`, `\"type\":\"short\"`, `\"type\":\"long\"`,
		`\"type\":\"float\"`, `\"type\":\"double\"`, `\"type\":\"decimal(9,2)\"`, `\"type\":\"decimal(38,10)\"`, `\"type\":\"binary\"`,
		`\"type\":\"date\"`, `\"type\":\"timestamp\"`, `\"type\":\"timestamp_ntz\"`} {
		if !bytes.Contains(log0, []byte(w)) {
			t.Errorf("commit 0 lacks %s", w)
		}
	}
	var csvOut, jsonOut bytes.Buffer
	if err := Show(ctx, &csvOut, dir, FormatCSV, -1); err != nil {
		t.Fatal(err)
	}
	if err := Show(ctx, &jsonOut, dir, FormatJSONL, -1); err != nil {
		t.Fatal(err)
	}
	// Key 1 of batch 0 (x = 10): Spark's show() text of each type.
	for _, w := range []string{"k,b,i8,i16,i64,f32,f64,d9,d18,d38,s,bin,day,ts,ntz\n",
		"\n1,false,-118,-1000,10995116277760,3.3333333,1.4285714285714286,-1234.50,1000000000.0070,-1234567890123456789012345678.0123456779,éééééééééé,[00 0A FF],2022-01-18,2023-11-14T22:13:20.01001Z,1969-12-31T00:00:00.00001\n"} {
		if !strings.Contains(csvOut.String(), w) {
			t.Errorf("show csv lacks %q:\n%s", w, csvOut.String())
		}
	}
	if w := `"bin":"AAr/","day":"2022-01-18"`; !strings.Contains(jsonOut.String(), w) {
		t.Errorf("show jsonl lacks %s:\n%s", w, jsonOut.String())
	}
	f := snap.Files()[0]
	pf, fh, err := openParquet(vfs.Default, filepath.Join(dir, f.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sch := pf.Schema().String()
	for _, w := range []string{"optional boolean b", "optional int32 i8 (INT(8,true))", "optional int32 i16 (INT(16,true))",
		"optional float f32", "optional int32 d9 (DECIMAL(9,2))", "optional int64 d18 (DECIMAL(18,4))",
		"optional fixed_len_byte_array(16) d38 (DECIMAL(38,10))", "optional binary bin", "optional int32 day (DATE)",
		"optional int64 ntz (TIMESTAMP(isAdjustedToUTC=false,unit=MICROS))"} {
		if !strings.Contains(sch, w) {
			t.Errorf("parquet schema lacks %q:\n%s", w, sch)
		}
	}
}

// TestTypedStats: Delta's per-file stats of every type, for a file of
// keys 1 and 2 (and a row of nulls): numbers plain, decimals with their
// scale, dates as yyyy-MM-dd, timestamp_ntz without a zone, no min/max of
// boolean and binary, nullCount of every column.
func TestTypedStats(t *testing.T) {
	l, err := newOutLayout(typedSchema())
	if err != nil {
		t.Fatal(err)
	}
	rs, err := batchRowSet(l, typedBatch([]int64{1, 2, 9}, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"numRecords":3,"minValues":{"k":1,"i8":-118,"i16":-2000,"i64":10995116277760,"f32":3.3333333,"f64":1.4285714285714286,` +
		`"d9":-2469.00,"d18":1000000000.0070,"d38":-1234567890123456789012345678.0123456779,"s":"éééééééééé","day":"2022-01-18",` +
		`"ts":"2023-11-14T22:13:20.010Z","ntz":"1969-12-31T00:00:00.000"},` +
		`"maxValues":{"k":9,"i8":-108,"i16":-1000,"i64":21990232555520,"f32":6.6666665,"f64":2.857142857142857,` +
		`"d9":-1234.50,"d18":2000000000.0140,"d38":-1234567890123456789012345678.0123456769,"s":"éééééééééééééééééééé","day":"2022-01-28",` +
		`"ts":"2023-11-14T22:13:20.020Z","ntz":"1969-12-31T00:00:00.000"},` +
		`"nullCount":{"k":0,"b":1,"i8":1,"i16":1,"i64":1,"f32":1,"f64":1,"d9":1,"d18":1,"d38":1,"s":1,"bin":1,"day":1,"ts":1,"ntz":1}}`
	if got := rs.stats(nil); got != want {
		t.Fatalf("stats\n got %s\nwant %s", got, want)
	}
	groups, err := encodeRows(io.Discard, l.pq, rs)
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.stats(groups); got != want {
		t.Fatalf("stats from the file's statistics\n got %s\nwant %s", got, want)
	}
}

// rowText renders row r of b's columns by type, for comparisons.
func rowText(b *stream.Batch, r int) string {
	var parts []string
	for i := range b.Columns {
		c := &b.Columns[i]
		v := "null"
		if !c.IsNull(r) {
			switch c.Type.Storage() {
			case stream.Decimal:
				v = c.Decimals[r].Text(c.Type.Scale())
			case stream.Float64:
				v = formatG(c.Float64s[r])
			case stream.String:
				v = "\"" + c.Strings[r] + "\""
			default:
				v = formatInt(c.Int64s[r])
			}
		}
		parts = append(parts, c.Name+"="+v)
	}
	return strings.Join(parts, " ")
}

func formatG(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func formatInt(x int64) string { return strconv.FormatInt(x, 10) }
