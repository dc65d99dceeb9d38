package shape

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

func sample() Shape {
	return Shape{
		Sources:    []Source{{Name: "s3_backfill", Provider: "s3archive", Location: "s3://b/v1.0/eth/blocks", Options: "maxFilesPerTrigger=2"}},
		From:       "blocks",
		Projection: []string{"window", "source", "miner", "count(*) as count"},
		Columns:    []string{"block_ts", "source", "miner"},
		Window:     &Window{Column: "block_ts", Size: "5 minutes"},
		Watermark:  &Watermark{Column: "block_ts", DelayUs: 172800000000},
		Keys:       []string{"source", "miner"}, Aggregates: []string{"count(*) as count"},
		OutputMode: "update", OutputSchema: "x", StateSchema: "y",
		Sink: Sink{Format: "delta", Location: "/t"}, Trigger: "available-now",
	}
}

func TestRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("ck", 0o755); err != nil {
		t.Fatal(err)
	}
	if r, err := ReadLatest(fs, "ck"); r != nil || err != nil {
		t.Fatalf("empty checkpoint: %v %v", r, err)
	}
	a, b := sample(), sample()
	b.Filter = "(gas_used > 0)"
	if a.Equal(b) || !a.Equal(sample()) {
		t.Fatal("Equal")
	}
	if err := Write(fs, "ck", 0, Record{FirstBatchID: 0, Shape: a}); err != nil {
		t.Fatal(err)
	}
	if err := Write(fs, "ck", 1, Record{FirstBatchID: 7, Shape: b}); err != nil {
		t.Fatal(err)
	}
	if err := Write(fs, "ck", 1, Record{FirstBatchID: 8, Shape: b}); err == nil {
		t.Fatal("overwrote shape/1")
	}
	r, err := ReadLatest(fs, "ck")
	if err != nil || r.Seq != 1 || r.FirstBatchID != 7 || !r.Shape.Equal(b) {
		t.Fatalf("latest %+v %v", r, err)
	}
	f, _ := fs.Create("ck/shape/junk", vfs.WriteCategoryUnspecified)
	f.Close()
	if _, err := ReadLatest(fs, "ck"); errcode.Code(err) != errcode.CheckpointCorrupt || !strings.Contains(err.Error(), "ck/shape/junk") {
		t.Fatalf("junk file: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	good, err := Encode(Record{Shape: sample()})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "v1", "v2\n{}", "v1\n{", "v1\n{\"firstBatchId\":-1,\"shape\":{}}", "v1\n{\"other\":1}", string(good) + "x"} {
		if _, err := Parse("p", []byte(bad)); errcode.Code(err) != errcode.CheckpointCorrupt {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	good, _ := Encode(Record{FirstBatchID: 3, Shape: sample()})
	f.Add(good)
	f.Add([]byte("v1\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse("p", data)
		if err != nil {
			if errcode.Code(err) != errcode.CheckpointCorrupt {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		enc, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Parse("p", enc)
		if err != nil || !r2.Shape.Equal(r.Shape) || r2.FirstBatchID != r.FirstBatchID {
			t.Fatalf("re-encoded record does not parse back: %v", err)
		}
	})
}

// TestVersions pins the two versions: a shape without a sink id is
// written as v1, exactly as version 1 wrote it (an old binary reads it), one
// with an id as v2; both read back, and a version whose sink id does not
// fit it is corrupt.
func TestVersions(t *testing.T) {
	v1 := "v1\n" + `{"firstBatchId":2,"shape":{"sources":[],"from":"","filter":"","projection":[],"columns":[],"window":null,"watermark":null,"keys":[],"aggregates":[],"outputMode":"","outputSchema":"","stateSchema":"","sink":{"format":"delta","location":"/t"},"trigger":""}}` + "\n"
	r, err := Parse("p", []byte(v1))
	if err != nil || r.Shape.Sink.ID != "" || r.Shape.Sink.Location != "/t" {
		t.Fatalf("v1: %+v %v", r, err)
	}
	if b, err := Encode(r); err != nil || string(b) != v1 {
		t.Fatalf("a shape without a sink id encodes as\n%s\nwant the v1 bytes\n%s (%v)", b, v1, err)
	}
	r.Shape.Sink.ID = "5a3e"
	b, err := Encode(r)
	if err != nil || !strings.HasPrefix(string(b), "v2\n") || !strings.Contains(string(b), `"id":"5a3e"`) {
		t.Fatalf("v2: %s %v", b, err)
	}
	if back, err := Parse("p", b); err != nil || !back.Shape.Equal(r.Shape) {
		t.Fatalf("v2 round trip: %+v %v", back, err)
	}
	for _, bad := range []string{"v1" + string(b)[2:], "v2" + v1[2:]} {
		if _, err := Parse("p", []byte(bad)); errcode.Code(err) != errcode.CheckpointCorrupt {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// chained is a plan of two aggregations: hourly sums over 5-minute ones.
func chained() []Operator {
	return []Operator{
		{Kind: KindAggregate, Window: &Window{Column: "ts", Size: "5 minutes"}, Keys: []string{"sym"}, Aggregates: []string{"sum(v) as v"}, StateSchema: "a"},
		{Kind: KindAggregate, Window: &Window{Column: "ts5", Size: "1 hour"}, Keys: []string{"sym"}, Aggregates: []string{"sum(v) as v"}, StateSchema: "b",
			Input: []string{"select window_time(window_end) as ts5, sym, v"}},
	}
}

// TestVersion3 pins the operator list: a plan of one aggregation is still
// written as v1 (operator 0 in the top-level fields, the bytes of a record
// written before operators were listed), a plan of two as v3 with the list;
// every version reads back to the same operators, and a v3 record that
// contradicts itself, or a v1 or v2 one listing operators, is corrupt.
func TestVersion3(t *testing.T) {
	one, err := Encode(Record{Shape: sample()})
	if err != nil {
		t.Fatal(err)
	}
	ops := sample().OperatorList()
	if len(ops) != 1 || ops[0].ID != 0 || ops[0].StateSchema != "y" || ops[0].Window.Size != "5 minutes" {
		t.Fatalf("a v1 shape's operators: %+v", ops)
	}
	asList, err := Encode(Record{Shape: sample().WithOperators(ops)})
	if err != nil || string(asList) != string(one) || !strings.HasPrefix(string(one), "v1\n") {
		t.Fatalf("one aggregation as a list encodes as\n%s\nwant the v1 bytes\n%s (%v)", asList, one, err)
	}
	two := sample().WithOperators(chained())
	b, err := Encode(Record{FirstBatchID: 4, Shape: two})
	if err != nil || !strings.HasPrefix(string(b), "v3\n") || strings.Contains(string(b), `"stateSchema":"y"`) {
		t.Fatalf("two operators: %s %v", b, err)
	}
	back, err := Parse("p", b)
	if err != nil || !back.Shape.Equal(two) || back.FirstBatchID != 4 {
		t.Fatalf("v3 round trip: %+v %v", back, err)
	}
	got := back.Shape.OperatorList()
	if len(got) != 2 || got[1].ID != 1 || got[1].StateSchema != "b" || got[1].Input[0] != "select window_time(window_end) as ts5, sym, v" {
		t.Fatalf("v3 operators: %+v", got)
	}
	if two.Equal(sample()) {
		t.Fatal("a plan of two equals a plan of one")
	}
	text := string(b)
	for _, bad := range []string{
		"v1" + text[2:], "v2" + text[2:], // a list in an old version
		strings.Replace(text, `"id":1`, `"id":2`, 1), // ids out of order
		strings.Replace(text, `"kind":"aggregate"`, `"kind":"bogus"`, 1),
		"v3" + string(one)[2:],                                            // v3 without operators
		strings.Replace(text, `"stateSchema":""`, `"stateSchema":"y"`, 1), // top-level state besides the list
	} {
		if _, err := Parse("p", []byte(bad)); errcode.Code(err) != errcode.CheckpointCorrupt {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
