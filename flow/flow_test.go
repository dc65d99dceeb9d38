package flow_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/sink/console"
	"github.com/ethstream/ethstream/stream"
)

// TestBuildRefuses: a plan that cannot run is refused at Build, with the
// first error and its code, before any checkpoint is touched.
func TestBuildRefuses(t *testing.T) {
	five := flow.Aggregation{Window: &agg.Window{Column: "at", Size: 5 * time.Minute}, GroupBy: []string{"pair"},
		Aggregates: []agg.Aggregate{{Kind: agg.Count}}}
	for _, c := range []struct {
		name string
		q    *flow.Query
		want string
	}{
		{"watermark on a string", flow.New("q").Read("f", &Feed{}).WithWatermark("pair", time.Minute), `watermark column "pair" is not a timestamp`},
		{"where on a missing column", flow.New("q").Read("f", &Feed{}).Where(flow.Col("nope").Gt(1)), "nope"},
		{"select of a missing column", flow.New("q").Read("f", &Feed{}).Select(flow.Col("nope")), `select reads column "nope"`},
		{"window_time without a window", flow.New("q").Read("f", &Feed{}).Select(flow.Col("pair").As("x"), flow.WindowTime()), `select reads column "window_end"`},
		{"select names a column twice", flow.New("q").Read("f", &Feed{}).Select(flow.Col("at"), flow.Col("pair").As("at")), `names column "at" twice`},
		{"source after a step", flow.New("q").Read("f", &Feed{}).Where(flow.Col("price").Gt(0)).Read("g", &Feed{}), "read after the plan's first step"},
		{"watermark after an operator", flow.New("q").Read("f", &Feed{}).Aggregate(five).WithWatermark("window_start", time.Minute), "withWatermark after a stateful operator"},
		{"chained after update mode", flow.New("q").Read("f", &Feed{}).WithWatermark("at", time.Minute).Aggregate(five).
			Select(flow.WindowTime(), flow.Col("pair")).Aggregate(five), "chained stateful operators run in append mode only"},
		{"aggregate of a missing column", flow.New("q").Read("f", &Feed{}).Aggregate(flow.Aggregation{GroupBy: []string{"nope"}, Aggregates: []agg.Aggregate{{Kind: agg.Count}}}), "nope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.q.WriteTo(&console.Sink{}).Build()
			if err == nil || !strings.Contains(err.Error(), c.want) || errcode.Code(err) == "" {
				t.Fatalf("got %v, want a coded error with %q", err, c.want)
			}
		})
	}
}

// TestBuildPlan: the engine query a plan builds: a plan of one aggregation
// is the engine's one-operator shorthand; a chain lists its stages in
// order, its operators numbered in the shape it records.
func TestBuildPlan(t *testing.T) {
	one, err := flow.New("q").Read("f", &Feed{}).WithWatermark("at", time.Minute).
		Aggregate(flow.Aggregation{Window: &agg.Window{Column: "at", Size: 5 * time.Minute}, Aggregates: []agg.Aggregate{{Kind: agg.Count}}}).
		WriteTo(&console.Sink{}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if one.Operator == nil || one.Stages != nil || one.Watermark.Column != "at" || one.Shape == nil || len(one.Shape.Operators) != 0 ||
		one.Shape.StateSchema == "" || len(one.Shape.OperatorList()) != 1 {
		t.Fatalf("one aggregation: %+v shape %+v", one, one.Shape)
	}
	chain, err := hourlyOverFiveMinutes(&Feed{}, &console.Sink{}, "2").Build()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range chain.Stages {
		if s.Operator != nil {
			kinds = append(kinds, "operator")
		} else {
			kinds = append(kinds, s.Transform.String())
		}
	}
	if got := strings.Join(kinds, " | "); got != "operator | select window_time(window_end) as at, pair, volume, trades | operator" {
		t.Fatalf("stages: %s", got)
	}
	ops := chain.Shape.OperatorList()
	if len(ops) != 2 || ops[1].ID != 1 || ops[1].Window.Size != "1 hour" || ops[1].Input[0] != "select window_time(window_end) as at, pair, volume, trades" ||
		chain.Shape.OutputMode != "append" || chain.Trigger.Kind != engine.AvailableNow {
		t.Fatalf("chain shape: %+v", chain.Shape)
	}
}

// TestSteps: Where keeps the rows that are TRUE (a NULL is dropped, signs
// follow their rows), Select shares or derives columns and keeps the key
// columns it selects (window_time stands for a keyed window_end), and
// window_time is the end minus one microsecond.
func TestSteps(t *testing.T) {
	in := &stream.Batch{Len: 4, Signs: []int8{1, -1, 1, 1}, Columns: []stream.Column{
		{Name: "window_start", Type: stream.Timestamp, Int64s: []int64{0, 0, 300e6, 300e6}},
		{Name: "window_end", Type: stream.Timestamp, Int64s: []int64{300e6, 300e6, 600e6, 600e6}},
		{Name: "pair", Type: stream.String, Strings: []string{"a", "b", "c", "d"}},
		{Name: "v", Type: stream.Int64, Int64s: []int64{5, 7, 0, 9}, Valid: []bool{true, true, true, false}},
	}}
	schema := stream.Schema{Fields: []stream.Field{{Name: "window_start", Type: stream.Timestamp}, {Name: "window_end", Type: stream.Timestamp},
		{Name: "pair", Type: stream.String}, {Name: "v", Type: stream.Int64, Nullable: true}}, Key: []string{"window_start", "window_end", "pair"}}
	src := &schemaOnly{schema: schema}
	q, err := flow.New("q").Read("s", src).Where(flow.Col("v").Gt(1)).
		Select(flow.WindowTime().As("t"), flow.Col("pair"), flow.Col("v").As("value")).Build()
	if err != nil {
		t.Fatal(err)
	}
	b := in
	for _, s := range q.Stages {
		if b, err = s.Transform.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	if b.Len != 2 || b.Signs[0] != 1 || b.Signs[1] != -1 || b.Columns[0].Name != "t" || b.Columns[0].Int64s[0] != 300e6-1 ||
		b.Columns[1].Strings[1] != "b" || b.Columns[2].Name != "value" || b.Columns[2].Int64s[1] != 7 || b.Validate() != nil {
		t.Fatalf("rows: %+v", b)
	}
	if in.Columns[1].Int64s[0] != 300e6 {
		t.Fatal("window_time modified its input")
	}
	out, err := q.Stages[1].Transform.OutputSchema(schema)
	if err != nil || out.String() != "t timestamp, pair string, value int64 null (key: t, pair)" {
		t.Fatalf("select's schema: %v %v", out, err)
	}
}

// schemaOnly is a source of the given schema that is never run.
type schemaOnly struct {
	Feed
	schema stream.Schema
}

func (s *schemaOnly) Schema() stream.Schema { return s.schema }
