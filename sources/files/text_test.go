package files

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// textRow is a generated row of the text-format tests; nil fields are null.
type textRow struct {
	id   *int64
	name *string
	x    *float64
	at   *time.Time
}

const textDDL = "id BIGINT, name STRING, x DOUBLE, at TIMESTAMP"

func (r textRow) want() string {
	f := func(ok bool, s func() string) string {
		if !ok {
			return "null"
		}
		return s()
	}
	return strings.Join([]string{
		f(r.id != nil, func() string { return strconv.FormatInt(*r.id, 10) }),
		f(r.name != nil, func() string { return *r.name }),
		f(r.x != nil, func() string { return fmtFloat(*r.x) }),
		f(r.at != nil, func() string { return r.at.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano) }),
	}, "|")
}

var nameRunes = []rune(`ab ,"'\;|é日` + "\t")

func randRow(r *rand.Rand) textRow {
	var out textRow
	if r.IntN(5) > 0 {
		v := r.Int64() >> r.IntN(64)
		if r.IntN(2) == 0 {
			v = -v
		}
		out.id = &v
	}
	if r.IntN(5) > 0 {
		n := 1 + r.IntN(8)
		var b strings.Builder
		for range n {
			b.WriteRune(nameRunes[r.IntN(len(nameRunes))])
		}
		s := b.String()
		out.name = &s
	}
	if r.IntN(5) > 0 {
		v := r.NormFloat64() * math.Pow(10, float64(r.IntN(30)-15))
		out.x = &v
	}
	if r.IntN(5) > 0 {
		v := time.Unix(r.Int64N(4e9)-1e9, r.Int64N(1e9)).UTC()
		out.at = &v
	}
	return out
}

// TestCSVAgainstEncodingCSV writes random rows with Go's encoding/csv
// writer (RFC 4180: doubled quotes, so escape is turned off) in files of
// several lines, and checks that the source reads back exactly the rows
// written: an empty string is null (Spark's nullValue default "").
func TestCSVAgainstEncodingCSV(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	var want []string
	for f := 0; f < 20; f++ {
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		if f%2 == 0 {
			_ = w.Write([]string{"id", "name", "x", "at"})
		}
		for range r.IntN(30) {
			row := randRow(r)
			if row.name != nil && *row.name == "" {
				row.name = nil
			}
			rec := []string{"", "", "", ""}
			if row.id != nil {
				rec[0] = strconv.FormatInt(*row.id, 10)
			}
			if row.name != nil {
				rec[1] = *row.name
			}
			if row.x != nil {
				rec[2] = strconv.FormatFloat(*row.x, 'g', -1, 64)
			}
			if row.at != nil {
				layouts := []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.000000-07:00"}
				zone := time.FixedZone("", 3600*(r.IntN(25)-12))
				layout := layouts[r.IntN(len(layouts))]
				if !strings.Contains(layout, "07") && layout != time.RFC3339Nano {
					zone = time.UTC // no zone in the text: read as UTC
				}
				rec[3] = row.at.In(zone).Format(layout)
			}
			_ = w.Write(rec)
			want = append(want, row.want())
		}
		w.Flush()
		header := "false"
		if f%2 == 0 {
			header = "true"
		}
		// One directory per header setting.
		writeFile(t, dir, fmt.Sprintf("header=%s/%02d.csv", header, f), buf.String())
	}
	var got []string
	for _, h := range []string{"true", "false"} {
		s := mustSource(t, CSV, fileLoc(dir+"/header="+h)+"?schema="+url.QueryEscape(textDDL)+"&escape=&mode=FAILFAST&header="+h)
		if err := s.Open(t.Context(), testEnv(t)); err != nil {
			t.Fatal(err)
		}
		bs, _ := drain(t, s, nil)
		got = append(got, flat(bs)...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("row %d: got %q, want %q (%d vs %d rows)", i, got[i], want[i], len(got), len(want))
			}
		}
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
}

// TestJSONAgainstEncodingJSON writes random rows with encoding/json (keys
// left out or null for nulls, timestamps as RFC 3339 strings or epoch
// seconds) and checks the source reads exactly the rows written.
func TestJSONAgainstEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	dir := t.TempDir()
	var want []string
	for f := 0; f < 20; f++ {
		var buf bytes.Buffer
		for range r.IntN(30) {
			row := randRow(r)
			m := map[string]any{}
			put := func(k string, present bool, v any) {
				switch {
				case present:
					m[k] = v
				case r.IntN(2) == 0:
					m[k] = nil
				}
			}
			put("id", row.id != nil, func() any {
				if row.id == nil {
					return nil
				}
				return *row.id
			}())
			put("name", row.name != nil, func() any {
				if row.name == nil {
					return nil
				}
				return *row.name
			}())
			put("x", row.x != nil, func() any {
				if row.x == nil {
					return nil
				}
				return *row.x
			}())
			if row.at != nil {
				if r.IntN(3) == 0 {
					sec := row.at.Truncate(time.Second)
					row.at = &sec
					m["at"] = sec.Unix()
				} else {
					m["at"] = row.at.Format(time.RFC3339Nano)
				}
			}
			m["extra"] = []int{1, 2}
			line, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(line)
			buf.WriteString("\n")
			if r.IntN(5) == 0 {
				buf.WriteString("  \n")
			}
			want = append(want, row.want())
		}
		writeFile(t, dir, fmt.Sprintf("%02d.json", f), buf.String())
	}
	s := mustSource(t, JSON, fileLoc(dir)+"?schema="+url.QueryEscape(textDDL)+"&mode=FAILFAST")
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	bs, _ := drain(t, s, nil)
	got := flat(bs)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("row %d: got %q, want %q", i, got[i], want[i])
			}
		}
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
}

// TestParseModes checks Spark's three modes on the same malformed lines:
// a CSV line with too few fields, a bad number, an unterminated quote; a
// JSON line that is not an object, a string in an integer column.
func TestParseModes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "csv/a.csv", "1,ann,2026-01-01\n2,bob\nx,cy,2026-01-02\n4,\"dee,2026-01-03\n5,\"e\"\"e\",2026-01-04T05:06:07Z\n")
	writeFile(t, dir, "json/a.json", "{\"id\":1,\"name\":\"ann\"}\n[1]\n{\"id\":\"2\",\"name\":\"bob\"}\n{\"id\":3\n{\"id\":4} x\n{\"id\":5,\"name\":{\"a\": 1}}\n")
	for _, c := range []struct {
		format, ddl, mode string
		want              string
		err               string
	}{
		{CSV, "id INT, name STRING, t TIMESTAMP", "PERMISSIVE",
			"[[1|ann|2026-01-01T00:00:00Z 2|bob|null null|cy|2026-01-02T00:00:00Z null|null|null 5|e\"e|2026-01-04T05:06:07Z]]", ""},
		{CSV, "id INT, name STRING, t TIMESTAMP, _corrupt_record STRING", "PERMISSIVE",
			"[[1|ann|2026-01-01T00:00:00Z|null 2|bob|null|2,bob null|cy|2026-01-02T00:00:00Z|x,cy,2026-01-02 null|null|null|4,\"dee,2026-01-03 5|e\"e|2026-01-04T05:06:07Z|null]]", ""},
		{CSV, "id INT, name STRING, t TIMESTAMP", "DROPMALFORMED", "[[1|ann|2026-01-01T00:00:00Z 5|e\"e|2026-01-04T05:06:07Z]]", ""},
		{CSV, "id INT, name STRING, t TIMESTAMP", "FAILFAST", "", "at line 2: \"2,bob\""},
		{JSON, "id BIGINT, name STRING, _corrupt_record STRING", "PERMISSIVE",
			"[[1|ann|null null|null|[1] null|bob|{\"id\":\"2\",\"name\":\"bob\"} null|null|{\"id\":3 null|null|{\"id\":4} x 5|{\"a\":1}|null]]", ""},
		{JSON, "id BIGINT, name STRING", "DROPMALFORMED", "[[1|ann 5|{\"a\":1}]]", ""},
		{JSON, "id BIGINT, name STRING", "FAILFAST", "", "at line 2: \"[1]\""},
	} {
		t.Run(c.format+"/"+c.mode, func(t *testing.T) {
			s := mustSource(t, c.format, fileLoc(dir+"/"+c.format)+"?schema="+url.QueryEscape(c.ddl)+"&mode="+c.mode)
			if err := s.Open(t.Context(), testEnv(t)); err != nil {
				t.Fatal(err)
			}
			if c.err != "" {
				end, _ := s.LatestOffset(t.Context(), nil)
				err := s.ReadBatch(t.Context(), nil, end, func(*stream.Batch) error { return nil })
				if errcode.Code(err) != CodeMalformedRecord || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "a."+c.format) {
					t.Fatalf("%v", err)
				}
				return
			}
			got, _ := drain(t, s, nil)
			if fmt.Sprint(got) != c.want {
				t.Fatalf("got\n%v\nwant\n%s", got, c.want)
			}
		})
	}
}

// TestCSVOptions: sep, quote, escape (Spark's default backslash), nullValue
// and timestampFormat.
func TestCSVOptions(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.csv", "1;'a\\'b';NA;01/02/2026 13:14:15.5\r\n2;'';x;31/12/1999 00:00:00.0\n")
	s := mustSource(t, CSV, fileLoc(dir)+"?schema="+url.QueryEscape("id SMALLINT, s STRING, n STRING, t TIMESTAMP")+
		"&sep=%3B&quote='&nullValue=NA&timestampFormat="+url.QueryEscape("dd/MM/yyyy HH:mm:ss.S")+"&mode=FAILFAST")
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	got, _ := drain(t, s, nil)
	if want := "[[1|a'b|null|2026-02-01T13:14:15.5Z 2||x|1999-12-31T00:00:00Z]]"; fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
}

func TestOptionErrors(t *testing.T) {
	for _, c := range []struct{ format, q, msg string }{
		{CSV, "nope=1", `unknown csv source option "nope"`},
		{CSV, "sep=ab", "one ASCII character"},
		{JSON, "multiLine=true", "JSON lines only"},
		{JSON, "header=true", `unknown json source option "header"`},
		{Parquet, "mode=FAILFAST", `unknown parquet source option "mode"`},
		{CSV, "mode=lenient", "PERMISSIVE, DROPMALFORMED or FAILFAST"},
		{CSV, "maxFileAge=7y", "7d, 12h"},
		{CSV, "timestampFormat=yyyy-QQ", `pattern letter 'Q'`},
		{CSV, "maxFilesPerTrigger=0", "positive integer"},
		{CSV, "endpoint=http://x", "s3 options given for file uri"},
	} {
		_, err := ParseURI(c.format, "file:///d?"+c.q)
		if errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %s: %v", c.format, c.q, err)
		}
	}
	if _, err := ParseURI(CSV, "file:///d?schema=a+int,+A+int"); errcode.Code(err) != "COLUMN_ALREADY_EXISTS" {
		t.Errorf("duplicate column: %v", err)
	}
	o, err := ParseURI(CSV, "file:///d/?MAXFILESPERTRIGGER=3&maxBytesPerTrigger=2k&maxFileAge=90m&delimiter=%5Ct")
	if err != nil || o.MaxFilesPerTrigger != 3 || o.MaxBytesPerTrigger != 2048 || o.MaxFileAge != 90*time.Minute || o.Sep != '\t' || o.URI != "file:///d" {
		t.Fatalf("%+v %v", o, err)
	}
}
