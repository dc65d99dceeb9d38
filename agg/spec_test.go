package agg

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

func refSpec() Spec {
	return Spec{
		Window:         &Window{Column: ethblock.ColBlockTS, Size: 5 * time.Minute},
		GroupBy:        []string{stream.ColSource, ethblock.ColMiner},
		Aggregates:     []Aggregate{{Kind: Count, As: "count"}},
		Mode:           Update,
		WatermarkDelay: 48 * time.Hour,
		ColumnTypes:    maps.Clone(testColumnTypes),
	}
}

func TestNewValidates(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Spec)
		code string // "" = accepted
		msg  string
	}{
		{"reference", func(*Spec) {}, "", ""},
		{"default mode is update", func(s *Spec) { s.Mode = 0 }, "", ""},
		{"complete without watermark", func(s *Spec) { s.Mode = Complete; s.WatermarkDelay = 0 }, CodeUnsupportedOutputMode, "unbounded"},
		{"complete with watermark", func(s *Spec) { s.Mode = Complete }, "", ""},
		{"complete without window", func(s *Spec) { s.Mode = Complete; s.Window = nil; s.WatermarkDelay = 0 }, "", ""},
		{"append without watermark", func(s *Spec) { s.Mode = Append; s.WatermarkDelay = 0 }, CodeUnsupportedOutputMode, "append"},
		{"append without window", func(s *Spec) { s.Mode = Append; s.Window = nil }, CodeUnsupportedOutputMode, "append"},
		{"unknown mode", func(s *Spec) { s.Mode = 9 }, errcode.InvalidArgument, "output mode"},
		{"no aggregates", func(s *Spec) { s.Aggregates = nil }, errcode.InvalidArgument, "no aggregates"},
		{"zero window", func(s *Spec) { s.Window.Size = 0 }, errcode.InvalidArgument, "window size"},
		{"sub-microsecond window", func(s *Spec) { s.Window.Size = 1500 * time.Nanosecond }, errcode.InvalidArgument, "window size"},
		{"slide above size", func(s *Spec) { s.Window.Slide = 10 * time.Minute }, errcode.InvalidArgument, "slide"},
		{"negative slide", func(s *Spec) { s.Window.Slide = -time.Minute }, errcode.InvalidArgument, "slide"},
		{"negative delay", func(s *Spec) { s.WatermarkDelay = -1 }, errcode.InvalidArgument, "negative"},
		{"event time not a timestamp", func(s *Spec) { s.Window.Column = ethblock.ColNumber }, CodeDatatypeMismatch, "timestamp"},
		{"unknown event time column", func(s *Spec) { s.Window.Column = "ts" }, errcode.InvalidArgument, "ColumnTypes"},
		{"declared event time column", func(s *Spec) {
			s.Window.Column = "ts"
			s.ColumnTypes["ts"] = stream.Timestamp
		}, "", ""},
		{"unknown group column", func(s *Spec) { s.GroupBy = []string{"pool"} }, errcode.InvalidArgument, "pool"},
		{"array group column", func(s *Spec) {
			s.GroupBy = []string{"topics"}
			s.ColumnTypes["topics"] = stream.ArrayOf(stream.String)
		}, CodeDatatypeMismatch, "array<string>"},
		{"duplicate group column", func(s *Spec) { s.GroupBy = []string{"miner", "miner"} }, errcode.InvalidArgument, "twice"},
		{"group column named like the window", func(s *Spec) {
			s.GroupBy = []string{ColWindowStart}
			s.ColumnTypes[ColWindowStart] = stream.Timestamp
		}, errcode.InvalidArgument, "twice"},
		{"aggregate named like a group column", func(s *Spec) { s.Aggregates[0].As = "miner" }, errcode.InvalidArgument, "twice"},
		{"aggregate named like a hidden field", func(s *Spec) {
			s.Aggregates = []Aggregate{{Kind: Sum, Column: "gas_used", As: "g"}, {Kind: Count, As: "g__nonnull"}}
		}, errcode.InvalidArgument, "twice"},
		{"sum without column", func(s *Spec) { s.Aggregates = []Aggregate{{Kind: Sum}} }, errcode.InvalidArgument, "column"},
		{"sum of a string", func(s *Spec) { s.Aggregates = []Aggregate{{Kind: Sum, Column: "hash"}} }, CodeDatatypeMismatch, "sum"},
		{"sum of a timestamp", func(s *Spec) { s.Aggregates = []Aggregate{{Kind: Sum, Column: "block_ts"}} }, CodeDatatypeMismatch, "sum"},
		{"max of a timestamp", func(s *Spec) { s.Aggregates = []Aggregate{{Kind: Max, Column: "block_ts"}} }, "", ""},
		{"min of a string", func(s *Spec) { s.Aggregates = []Aggregate{{Kind: Min, Column: "miner"}} }, CodeDatatypeMismatch, "min"},
		{"unknown kind", func(s *Spec) { s.Aggregates = []Aggregate{{Kind: 7}} }, errcode.InvalidArgument, "kind"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := refSpec()
			w := *s.Window
			s.Window = &w
			s.Aggregates = append([]Aggregate(nil), s.Aggregates...)
			c.edit(&s)
			_, err := New(s)
			if c.code == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if errcode.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("New: %v, want code %s mentioning %q", err, c.code, c.msg)
			}
		})
	}
}

// TestSchema pins the reference query's state layout: window_end first (so
// eviction is a range scan), the value schema the Delta sink reads back.
func TestSchema(t *testing.T) {
	op, err := New(refSpec())
	if err != nil {
		t.Fatal(err)
	}
	got := op.Schema().String()
	want := "stateStoreSave key(window_end timestamp, window_start timestamp, source string, miner string) value(count int64) " +
		"spec(agg/v2 window=block_ts size=5m0s slide=5m0s groupBy=source,miner aggs=count(*):count)"
	if got != want {
		t.Fatalf("schema\n%s\nwant\n%s", got, want)
	}
	s := refSpec()
	s.Aggregates = []Aggregate{{Kind: Count}, {Kind: Sum, Column: ethblock.ColGasUsed}, {Kind: Max, Column: ethblock.ColBlockTS, As: "last"}}
	op, err = New(s)
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, f := range op.Schema().Value {
		vals = append(vals, f.Name+":"+f.Type.String())
	}
	if got, want := strings.Join(vals, ","), "count:int64,sum_gas_used:int64,sum_gas_used__nonnull:int64,last:timestamp,last__nonnull:int64"; got != want {
		t.Fatalf("value schema %s, want %s", got, want)
	}
}

func TestSpecEngineHelpers(t *testing.T) {
	s := refSpec()
	if got := s.InputColumns(); strings.Join(got, ",") != "block_ts,source,miner" {
		t.Fatalf("InputColumns = %v", got)
	}
	if col, delay, ok := s.Watermark(); !ok || col != ethblock.ColBlockTS || delay != 48*time.Hour {
		t.Fatalf("Watermark = %q %v %v", col, delay, ok)
	}
	s.Aggregates = append(s.Aggregates, Aggregate{Kind: Sum, Column: ethblock.ColGasUsed}, Aggregate{Kind: Max, Column: ethblock.ColBlockTS})
	if got := s.InputColumns(); strings.Join(got, ",") != "block_ts,source,miner,gas_used" {
		t.Fatalf("InputColumns = %v", got)
	}
	s.WatermarkDelay = 0
	if col, _, ok := s.Watermark(); ok {
		t.Fatalf("Watermark without delay = %q", col)
	}
}

// A state written with the v1 spec text (which also named the mode and the
// watermark) reopens under v2 when the window and aggregates are the same.
func TestCompatibleSpecV1(t *testing.T) {
	p, err := newPlan(Spec{Window: &Window{Column: ethblock.ColBlockTS, Size: 5 * time.Minute}, GroupBy: []string{stream.ColSource, ethblock.ColMiner},
		Aggregates: []Aggregate{{Kind: Count, As: "count"}}, Mode: Update, WatermarkDelay: 48 * time.Hour, ColumnTypes: testColumnTypes})
	if err != nil {
		t.Fatal(err)
	}
	v1 := "agg/v1 window=block_ts size=5m0s slide=5m0s groupBy=source,miner aggs=count(*):count mode=update watermark=block_ts-48h0m0s"
	if !p.compatibleSpec(v1) {
		t.Fatalf("v1 text not accepted for %s", p.schema.Spec)
	}
	for _, other := range []string{
		"agg/v1 window=block_ts size=10m0s slide=10m0s groupBy=source,miner aggs=count(*):count mode=update watermark=none",
		"agg/v1 window=block_ts size=5m0s slide=5m0s groupBy=miner aggs=count(*):count mode=update watermark=none",
		"agg/v3 window=block_ts size=5m0s slide=5m0s groupBy=source,miner aggs=count(*):count",
	} {
		if p.compatibleSpec(other) {
			t.Errorf("accepted %q", other)
		}
	}
}
