package ddl

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// TestParse checks schemas against Spark's StructType.fromDDL answers
// (simpleString of each column).
func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // name type[!] ..., "!" for NOT NULL
	}{
		{"order_id STRING, amount DECIMAL(10,2), event_time TIMESTAMP", "order_id string; amount decimal(10,2); event_time timestamp"},
		{"a int, b LONG, c short, d byte, e real, f dec, g numeric(5)", "a int; b bigint; c smallint; d tinyint; e float; f decimal(10,0); g decimal(5,0)"},
		{"`a b` string not null comment 'x\\'s', c varchar(3)", "a b string!; c varchar(3)"},
		{"`x``y` array<struct<p: int, q string not null>>, m map<string, array<double>>", "x`y array<struct<p:int,q:string>>; m map<string,array<double>>"},
		{"  t timestamp_ntz , l timestamp_ltz,b boolean,d date,bin binary", "t timestamp_ntz; l timestamp; b boolean; d date; bin binary"},
		{"1a INT", "1a int"},
	} {
		s, err := Parse(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		var got []string
		for _, f := range s.Fields {
			g := f.Name + " " + f.Type.String()
			if !f.Nullable {
				g += "!"
			}
			got = append(got, g)
		}
		if g := strings.Join(got, "; "); g != c.want {
			t.Errorf("%q: got %q, want %q", c.in, g, c.want)
		}
		again, err := Parse(s.String())
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Errorf("%q: re-parse of %q: %v %+v", c.in, s.String(), err, again)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, code, msg string }{
		{"", ParseSyntaxError, "expected a column"},
		{"a", ParseSyntaxError, "expected a data type"},
		{"a int,", ParseSyntaxError, "expected a column name"},
		{"a int b int", ParseSyntaxError, "',' or the end"},
		{"a integr", UnsupportedDatatype, `"INTEGR"`},
		{"a int, A string", DuplicateColumn, "`A` already exists"},
		{"a decimal(39,2)", ParseSyntaxError, "out of range"},
		{"a decimal(5,6)", ParseSyntaxError, "out of range"},
		{"a varchar", ParseSyntaxError, "(length)"},
		{"a array<int", ParseSyntaxError, "'>'"},
		{"`a int", ParseSyntaxError, "column name"},
		{"a int comment 'x", ParseSyntaxError, "quoted comment"},
		{"a int not", ParseSyntaxError, "NULL after NOT"},
	} {
		_, err := Parse(c.in)
		if errcode.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v, want %s containing %q", c.in, err, c.code, c.msg)
		}
	}
}

func TestStream(t *testing.T) {
	s, err := Parse("id BIGINT NOT NULL, n INT, x FLOAT, name VARCHAR(4), ts TIMESTAMP, b BOOLEAN, t TINYINT, sm SMALLINT, " +
		"d DOUBLE, amount DECIMAL(10,2), bin BINARY, day DATE, ntz TIMESTAMP_NTZ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Stream("csv")
	if err != nil {
		t.Fatal(err)
	}
	want := stream.Schema{Fields: []stream.Field{{Name: "id", Type: stream.Int64}, {Name: "n", Type: stream.Int32, Nullable: true},
		{Name: "x", Type: stream.Float32, Nullable: true}, {Name: "name", Type: stream.String, Nullable: true}, {Name: "ts", Type: stream.Timestamp, Nullable: true},
		{Name: "b", Type: stream.Boolean, Nullable: true}, {Name: "t", Type: stream.Int8, Nullable: true}, {Name: "sm", Type: stream.Int16, Nullable: true},
		{Name: "d", Type: stream.Float64, Nullable: true}, {Name: "amount", Type: stream.DecimalOf(10, 2), Nullable: true},
		{Name: "bin", Type: stream.Binary, Nullable: true}, {Name: "day", Type: stream.Date, Nullable: true}, {Name: "ntz", Type: stream.TimestampNTZ, Nullable: true}}}
	if !got.Equal(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for ddl, typ := range map[string]string{"m MAP<STRING,INT>": "MAP<STRING,INT>", "s STRUCT<a: INT>": "STRUCT<A:INT>"} {
		s, _ = Parse("id STRING, " + ddl)
		_, err = s.Stream("parquet")
		if errcode.Code(err) != UnsupportedForSource || !strings.Contains(err.Error(), "of the type "+typ) {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
}

// FuzzParse: any input parses or fails with a coded error, never panics;
// a parsed schema renders to DDL that parses back to the same schema.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a int", "order_id STRING, amount DECIMAL(10,2), event_time TIMESTAMP",
		"`x``y` array<struct<p: int, q string not null comment 'c'>>", "m map<string,map<int,array<double>>>", "a b c", "`", "'", "a int comment \"x\\\"\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(in)
		if err != nil {
			if errcode.Code(err) == "" {
				t.Fatalf("%q: uncoded error %v", in, err)
			}
			return
		}
		again, err := Parse(s.String())
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("%q -> %q: %v\n%+v\n%+v", in, s.String(), err, s, again)
		}
	})
}
