package pipeline

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

func TestParseSourceSpec(t *testing.T) {
	cases := []struct {
		in   string
		want SourceSpec
		code string
	}{
		{in: "s3_backfill=s3archive:s3://b/v1.0/eth/blocks?maxFilesPerTrigger=5",
			want: SourceSpec{Name: "s3_backfill", Format: "s3archive", URI: "s3://b/v1.0/eth/blocks?maxFilesPerTrigger=5"}},
		{in: "eth_live=ethrpc:http://127.0.0.1:8545?start_block=1&x=a=b",
			want: SourceSpec{Name: "eth_live", Format: "ethrpc", URI: "http://127.0.0.1:8545?start_block=1&x=a=b"}},
		{in: "=s3archive:file:///tmp/a", want: SourceSpec{Format: "s3archive", URI: "file:///tmp/a"}},
		// Names are the engine's to validate, so an invalid one passes here.
		{in: "my-src=ethrpc:http://h", want: SourceSpec{Name: "my-src", Format: "ethrpc", URI: "http://h"}},
		{in: "nofmt", code: errcode.InvalidArgument},
		{in: "a=kafka:x", code: errcode.InvalidArgument},
		{in: "a=s3archive", code: errcode.InvalidArgument},
		// The first '=' inside the URI: NAME= is missing.
		{in: "s3archive:s3://b/p?endpoint=http://127.0.0.1:9000", code: errcode.InvalidArgument},
		{in: "ethrpc:http://h?start_block=1", code: errcode.InvalidArgument},
	}
	for _, c := range cases {
		got, err := ParseSourceSpec(c.in)
		if c.code != "" {
			if errcode.Code(err) != c.code {
				t.Errorf("%q: err = %v, want code %s", c.in, err, c.code)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if got.String() != c.in {
			t.Errorf("%q does not round-trip: %q", c.in, got.String())
		}
	}
}

func TestParseTrigger(t *testing.T) {
	for in, want := range map[string]engine.Trigger{
		"available-now":         {Kind: engine.AvailableNow},
		"once":                  {Kind: engine.Once},
		"processing-time=200ms": {Kind: engine.ProcessingTime, Interval: 200 * time.Millisecond},
		"processing-time=0s":    {Kind: engine.ProcessingTime},
		"real-time":             {Kind: engine.RealTime},
		"real-time=250ms":       {Kind: engine.RealTime, Interval: 250 * time.Millisecond},
	} {
		got, err := ParseTrigger(in)
		if err != nil || got != want {
			t.Errorf("%q: got %+v, %v", in, got, err)
		}
		if back, _ := ParseTrigger(TriggerString(got)); back != got {
			t.Errorf("%q does not round-trip via %q", in, TriggerString(got))
		}
	}
	// Spark's spellings.
	for in, want := range map[string]engine.Trigger{
		"availableNow":                          {Kind: engine.AvailableNow},
		"AvailableNow":                          {Kind: engine.AvailableNow},
		"processingTime=5s":                     {Kind: engine.ProcessingTime, Interval: 5 * time.Second},
		"processingTime='5 seconds'":            {Kind: engine.ProcessingTime, Interval: 5 * time.Second},
		`processingTime="500 milliseconds"`:     {Kind: engine.ProcessingTime, Interval: 500 * time.Millisecond},
		"processingTime=interval 1 minute 30 s": {Kind: engine.ProcessingTime, Interval: 90 * time.Second},
		"processingTime=1 hour":                 {Kind: engine.ProcessingTime, Interval: time.Hour},
		"realTime":                              {Kind: engine.RealTime},
		"RealTime='1 second'":                   {Kind: engine.RealTime, Interval: time.Second},
	} {
		if got, err := ParseTrigger(in); err != nil || got != want {
			t.Errorf("%q: got %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "continuous", "processing-time=x", "processing-time=-1s", "processingTime=", "processingTime='5 parsecs'",
		"processingTime=-5 seconds", "processingTime=5", "once=1", "availableNow=true", "processingTime='5 seconds", "realTime=0s", "realTime=x"} {
		if _, err := ParseTrigger(bad); errcode.Code(err) != errcode.InvalidArgument {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func TestConfigArgsAreRunFlags(t *testing.T) {
	cfg := Config{Checkpoint: "/ck", Table: "/tb", LocalDir: "/cache",
		Sources: []SourceSpec{{Name: "a", Format: "ethrpc", URI: "http://h?x=1"}, {Format: "s3archive", URI: "file:///f"}},
		Conf:    map[string]string{"z": "1", "a": "2"}, Trigger: engine.Trigger{Kind: engine.ProcessingTime, Interval: time.Second},
		MaxBatches: 8, ProgressFile: "/p.jsonl"}
	got := strings.Join(cfg.Args(), " ")
	want := "run --checkpoint /ck --table /tb --local-dir /cache --source a=ethrpc:http://h?x=1 --source =s3archive:file:///f --conf a=2 --conf z=1 --trigger processing-time=1s --max-batches 8 --progress /p.jsonl"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestParseConf(t *testing.T) {
	got, err := ParseConf([]string{"a=1", "b=x=y"})
	if err != nil || !reflect.DeepEqual(got, map[string]string{"a": "1", "b": "x=y"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseConf([]string{"=1"}); errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("err = %v", err)
	}
}

func TestDefaultLocalDirIsStablePerCheckpoint(t *testing.T) {
	a, b, c := DefaultLocalDir("/x/ck"), DefaultLocalDir("/x/ck"), DefaultLocalDir("/y/ck")
	if a != b || a == c {
		t.Fatalf("%s %s %s", a, b, c)
	}
}

// The default query is the reference query compiled from SQL, and it is
// exactly ReferenceSpec.
func TestReferenceQueryIsReferenceSpec(t *testing.T) {
	c, err := CompileQuery(Config{Table: "t", Sources: []SourceSpec{{Name: "s3_backfill", Format: "s3archive", URI: "s3://b/p?maxFilesPerTrigger=2"}}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := agg.New(ReferenceSpec())
	if err != nil {
		t.Fatal(err)
	}
	if !c.agg.Schema().Equal(want.Schema()) || !c.agg.OutputSchema().Equal(want.OutputSchema()) || c.agg.Spec().WatermarkDelay != WatermarkDelay {
		t.Fatalf("compiled %s / %s, reference %s / %s", c.agg.Schema(), c.agg.OutputSchema(), want.Schema(), want.OutputSchema())
	}
	var q engine.Query
	if err := c.plan(&q); err != nil {
		t.Fatal(err)
	}
	if q.Operator != stream.Operator(c.agg) || q.Where != nil || strings.Join(q.Columns, ",") != "block_ts,source,miner" {
		t.Fatalf("operator %T where %v columns %v", q.Operator, q.Where, q.Columns)
	}
	if s := c.shape; s.Sources[0].Location != "s3://b/p" || s.Sources[0].Options != "maxFilesPerTrigger=2" || s.Watermark == nil || s.Watermark.DelayUs != WatermarkDelay.Microseconds() {
		t.Fatalf("shape %+v", s)
	}
}
