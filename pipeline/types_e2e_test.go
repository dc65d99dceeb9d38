package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// typedRow is one row of TestTypedFilesToDelta's files: a column of each
// Spark scalar type a file source reads.
type typedRow struct {
	B    bool    `parquet:"kb"`
	I8   int8    `parquet:"k8"`
	I16  int16   `parquet:"k16"`
	Day  int32   `parquet:"kd,date"`
	Dec  int64   `parquet:"kdec,decimal(2:10)"`
	S    string  `parquet:"ks"`
	NTZ  int64   `parquet:"kntz,timestamp(microsecond:local)"`
	F    float32 `parquet:"kf"`
	Amt  *int64  `parquet:"amt,optional,decimal(4:18)"`
	N    int32   `parquet:"n"`
	TSUs int64   `parquet:"ts,timestamp(microsecond)"`
}

const typedDDL = "kb BOOLEAN, k8 TINYINT, k16 SMALLINT, kd DATE, kdec DECIMAL(10,2), ks STRING, kntz TIMESTAMP_NTZ, kf FLOAT, " +
	"amt DECIMAL(18,4), n INT, ts TIMESTAMP"

func typedRows(n int) []typedRow {
	var out []typedRow
	for i := range n {
		r := typedRow{B: i%3 == 0, I8: int8(i%5 - 2), I16: int16(-300 * (i % 4)), Day: int32(19000 + i%6),
			Dec: int64(i%4) * 125, S: []string{"a", "b", "é"}[i%3], NTZ: int64(i%3) * 3_600_000_000, F: []float32{1.5, -0.25, 3}[i%3],
			N: int32(i * 1000003), TSUs: 1_700_000_000_000_000 + int64(i)*1_000_000}
		if i%7 != 0 {
			a := int64(i)*123456789 - 5e9 // up to 10^9 with 4 decimals
			r.Amt = &a
		}
		out = append(out, r)
	}
	return out
}

// cells renders r as CSV text and as a JSON object, as Spark writes them.
func (r typedRow) cells() (csv, js string) {
	day := time.Unix(int64(r.Day)*86400, 0).UTC().Format(time.DateOnly)
	ntz := time.UnixMicro(r.NTZ).UTC().Format("2006-01-02 15:04:05")
	ts := time.UnixMicro(r.TSUs).UTC().Format(time.RFC3339)
	dec := stream.Dec128Of(r.Dec).Text(2)
	amt, amtJS := "", "null"
	if r.Amt != nil {
		amt = stream.Dec128Of(*r.Amt).Text(4)
		amtJS = amt
	}
	f := strconv.FormatFloat(float64(r.F), 'g', -1, 32)
	csv = fmt.Sprintf("%t,%d,%d,%s,%s,%s,%s,%s,%s,%d,%s", r.B, r.I8, r.I16, day, dec, r.S, ntz, f, amt, r.N, ts)
	js = fmt.Sprintf(`{"kb":%t,"k8":%d,"k16":%d,"kd":%q,"kdec":%s,"ks":%q,"kntz":%q,"kf":%s,"amt":%s,"n":%d,"ts":%q}`,
		r.B, r.I8, r.I16, day, dec, r.S, ntz, f, amtJS, r.N, ts)
	return csv, js
}

// TestTypedFilesToDelta: the same rows as Parquet, CSV and JSON files with
// a DDL schema of every scalar type (each refused before with
// UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE or read as BIGINT/DOUBLE) run
// GROUP BY each key column with count, sum/min/max of a DECIMAL(18,4),
// sum of an INT and min of a FLOAT into a Delta table, and read back equal
// to a recount of the rows in big.Rat, with Spark's types in the table.
func TestTypedFilesToDelta(t *testing.T) {
	rows := typedRows(60)
	root := t.TempDir()
	dirs := map[string]string{}
	for _, format := range []string{"parquet", "csv", "json"} {
		dir := filepath.Join(root, format)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs[format] = dir
		for part := range 2 {
			chunk := rows[part*30 : part*30+30]
			name := filepath.Join(dir, fmt.Sprintf("part-%d.%s", part, format))
			var data []byte
			switch format {
			case "parquet":
				var buf strings.Builder
				w := parquet.NewGenericWriter[typedRow](&buf)
				if _, err := w.Write(chunk); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				data = []byte(buf.String())
			default:
				var b strings.Builder
				for _, r := range chunk {
					c, j := r.cells()
					if format == "csv" {
						b.WriteString(c + "\n")
					} else {
						b.WriteString(j + "\n")
					}
				}
				data = []byte(b.String())
			}
			if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys := []string{"kb", "k8", "k16", "kd", "kdec", "ks", "kntz", "kf"}
	for _, format := range []string{"parquet", "csv", "json"} {
		for _, key := range keys {
			t.Run(format+"/"+key, func(t *testing.T) {
				out := t.TempDir()
				q := fmt.Sprintf("SELECT %s, count(*) AS c, sum(amt) AS s, min(amt) AS lo, max(amt) AS hi, sum(n) AS sn, min(kf) AS mf, max(kd) AS md FROM t GROUP BY %s", key, key)
				cfg := Config{Checkpoint: filepath.Join(out, "ckpt"), Table: filepath.Join(out, "table"), LocalDir: filepath.Join(out, "local"),
					Sources: []SourceSpec{{Name: "t", Format: format,
						URI: "file://" + filepath.ToSlash(dirs[format]) + "?maxFilesPerTrigger=1&schema=" + url.QueryEscape(typedDDL)}},
					Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
					Conf:  map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
					Query: q, OutputMode: "update"}
				if _, err := Run(context.Background(), cfg); err != nil {
					t.Fatal(err)
				}
				got, types := readTypedTable(t, cfg.Table)
				want := typedRecount(rows, key)
				if len(got) != len(want) {
					t.Fatalf("%d groups, want %d\n%v\n%v", len(got), len(want), got, want)
				}
				for k, w := range want {
					if got[k] != w {
						t.Errorf("group %s:\n got %s\nwant %s", k, got[k], w)
					}
				}
				if !strings.HasSuffix(types, " c long, s decimal(28,4), lo decimal(18,4), hi decimal(18,4), sn long, mf float, md date") {
					t.Errorf("table types %s", types)
				}
			})
		}
	}
}

// readTypedTable reads the table's rows keyed by their first column's
// text, and its columns' Delta types.
func readTypedTable(t *testing.T, path string) (map[string]string, string) {
	ctx := context.Background()
	tbl, err := delta.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, f := range snap.Schema.Fields {
		types = append(types, f.Name+" "+f.Type.Primitive)
	}
	got := map[string]string{}
	err = snap.Scan(ctx, func(b *stream.Batch) error {
		for r := range b.Len {
			var vals []string
			for c := 1; c < len(b.Columns); c++ {
				vals = append(vals, cellText(&b.Columns[c], r))
			}
			got[cellText(&b.Columns[0], r)] = strings.Join(vals, " ")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, strings.Join(types, ", ")
}

func cellText(c *stream.Column, r int) string {
	if c.IsNull(r) {
		return "null"
	}
	switch c.Type.Kind() {
	case stream.Decimal:
		return c.Decimals[r].Text(c.Type.Scale())
	case stream.Float64, stream.Float32:
		return strconv.FormatFloat(c.Float64s[r], 'g', -1, 64)
	case stream.String, stream.Binary:
		return c.Strings[r]
	case stream.Boolean:
		return strconv.FormatBool(c.Int64s[r] != 0)
	}
	return strconv.FormatInt(c.Int64s[r], 10)
}

// typedRecount is the brute-force answer of TestTypedFilesToDelta's query
// grouped by key.
func typedRecount(rows []typedRow, key string) map[string]string {
	type acc struct {
		c, sn    int64
		s        *big.Int
		lo, hi   *int64
		mf       float32
		md       int32
		nonNullA bool
	}
	groups := map[string]*acc{}
	for _, r := range rows {
		k := map[string]string{"kb": strconv.FormatBool(r.B), "k8": strconv.Itoa(int(r.I8)), "k16": strconv.Itoa(int(r.I16)),
			"kd": strconv.Itoa(int(r.Day)), "kdec": stream.Dec128Of(r.Dec).Text(2), "ks": r.S, "kntz": strconv.FormatInt(r.NTZ, 10),
			"kf": strconv.FormatFloat(float64(r.F), 'g', -1, 64)}[key]
		a := groups[k]
		if a == nil {
			a = &acc{s: new(big.Int), md: r.Day, mf: r.F}
			groups[k] = a
		}
		a.c++
		a.sn += int64(r.N)
		if r.F < a.mf {
			a.mf = r.F
		}
		a.md = max(a.md, r.Day)
		if r.Amt != nil {
			a.nonNullA = true
			a.s.Add(a.s, big.NewInt(*r.Amt))
			if a.lo == nil || *r.Amt < *a.lo {
				a.lo = r.Amt
			}
			if a.hi == nil || *r.Amt > *a.hi {
				a.hi = r.Amt
			}
		}
	}
	out := map[string]string{}
	for k, a := range groups {
		s, lo, hi := "null", "null", "null"
		if a.nonNullA {
			d, _ := stream.Dec128FromBig(a.s)
			s, lo, hi = d.Text(4), stream.Dec128Of(*a.lo).Text(4), stream.Dec128Of(*a.hi).Text(4)
		}
		out[k] = fmt.Sprintf("%d %s %s %s %d %s %d", a.c, s, lo, hi, a.sn, strconv.FormatFloat(float64(a.mf), 'g', -1, 64), a.md)
	}
	return out
}
