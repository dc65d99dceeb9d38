package flow_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/join"
)

// TestJoinOnWhere: JoinOn.Where is placed as Spark's optimizer places a
// where() after a join: a left outer join whose WHERE rejects the right
// side's nulls runs as an inner one, each side's conjuncts on that side
// (the one not reading the event time below its watermark too), the
// conjunct over both sides after the join; the join as written is checked
// by Spark's rules for its type.
func TestJoinOnWhere(t *testing.T) {
	where := filter.And{L: filter.And{
		L: filter.Cmp{Op: filter.Gt, L: filter.Col{Name: "a_id"}, R: filter.Lit{Kind: filter.LitInt, Int: 5}},
		R: filter.Cmp{Op: filter.Ge, L: filter.Col{Name: "b_ts"}, R: filter.Lit{Kind: filter.LitString, Str: "2024-03-01"}}},
		R: filter.Cmp{Op: filter.Lt, L: filter.Col{Name: "a_id"}, R: filter.Col{Name: "b_id"}}}
	q, err := flow.New("join").
		Join(flow.From("a").Read("left", jSource("left")).WithWatermark("ts", jLeftDelay),
			flow.From("b").Read("right", jSource("right")).WithWatermark("ts", jRightDelay),
			flow.JoinOn{Type: join.LeftOuter, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi), Where: where}).
		WriteTo(streamtest.NewSink()).Build()
	if err != nil {
		t.Fatal(err)
	}
	ops := q.Shape.OperatorList()
	if len(ops) != 1 || ops[0].JoinType != "Inner" {
		t.Fatalf("operators %+v, want one Inner join", ops)
	}
	a, b := q.Sides[0], q.Sides[1]
	if a.Where == nil || a.Where.String() != "(id > 5)" || a.PreWatermark == nil || a.PreWatermark.String() != "(id > 5)" {
		t.Errorf("left side: where %v, below the watermark %v", a.Where, a.PreWatermark)
	}
	if b.Where == nil || b.Where.String() != "(ts >= '2024-03-01')" || b.PreWatermark != nil {
		t.Errorf("right side: where %v, below the watermark %v (the event time's conjunct stays above it)", b.Where, b.PreWatermark)
	}
	if len(q.Stages) != 2 || q.Stages[1].Transform == nil {
		t.Errorf("stages %+v, want the join then a filter (a_id < b_id)", q.Stages)
	}
	// A right outer join without the left watermark is refused as written,
	// though its WHERE would make it inner.
	_, err = flow.New("join").
		Join(flow.From("a").Read("left", jSource("left")),
			flow.From("b").Read("right", jSource("right")).WithWatermark("ts", jRightDelay),
			flow.JoinOn{Type: join.RightOuter, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi), Where: where}).
		WriteTo(streamtest.NewSink()).Build()
	if err == nil {
		t.Error("a right outer join without a left watermark ran because its WHERE narrows it")
	}
}

// TestJoinOnWhereColumns: JoinOn.Columns with Where prunes each side to
// the columns the query reads and the ones the WHERE reads (its pushed
// conjuncts run over the join's rows again), not to every column.
func TestJoinOnWhereColumns(t *testing.T) {
	where := filter.And{
		L: filter.Cmp{Op: filter.Gt, L: filter.Col{Name: "a_id"}, R: filter.Lit{Kind: filter.LitInt, Int: 5}},
		R: filter.Cmp{Op: filter.Lt, L: filter.Col{Name: "a_id"}, R: filter.Col{Name: "b_id"}}}
	q, err := flow.New("join").
		Join(flow.From("a").Read("left", jSource("left")).WithWatermark("ts", jLeftDelay),
			flow.From("b").Read("right", jSource("right")).WithWatermark("ts", jRightDelay),
			flow.JoinOn{Type: join.Inner, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi),
				Columns: [2][]string{{}, {}}, Where: where}).
		WriteTo(streamtest.NewSink()).Build()
	if err != nil {
		t.Fatal(err)
	}
	ops := q.Shape.OperatorList()
	const want = "left(keys=k; values=k string,ts timestamp,id int64) right(keys=k; values=k string,ts timestamp,id int64)"
	if len(ops) != 1 || !strings.Contains(ops[0].StateSchema, want) {
		t.Fatalf("operators %+v: the join's state schema lacks %q (a side stores the WHERE's columns and no other)", ops, want)
	}
}

// TestJoinSideColumns: a pruned side's sources read the columns the join
// stores and the side's filter reads, no other (engine.Side.Columns); an
// unpruned side, or one whose deduplication runs before the join, reads
// every column.
func TestJoinSideColumns(t *testing.T) {
	idGt := filter.Cmp{Op: filter.Gt, L: filter.Col{Name: "id"}, R: filter.Lit{Kind: filter.LitInt, Int: 5}}
	build := func(cols [2][]string, dedup bool) [2][]string {
		t.Helper()
		a := flow.From("a").Read("left", jSource("left")).WithWatermark("ts", jLeftDelay).Where(idGt)
		if dedup {
			a = a.DropDuplicates("k", "ts")
		}
		q, err := flow.New("join").
			Join(a, flow.From("b").Read("right", jSource("right")).WithWatermark("ts", jRightDelay),
				flow.JoinOn{Type: join.Inner, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi), Columns: cols}).
			WriteTo(streamtest.NewSink()).Build()
		if err != nil {
			t.Fatal(err)
		}
		return [2][]string{q.Sides[0].Columns, q.Sides[1].Columns}
	}
	// The join stores each side's key and event time (its watermark and
	// range column); the left side's filter reads id too.
	if got := build([2][]string{{}, {}}, false); !slices.Equal(got[0], []string{"k", "ts", "id"}) || !slices.Equal(got[1], []string{"k", "ts"}) {
		t.Errorf("pruned sides read %q, want [k ts id] and [k ts]", got)
	}
	if got := build([2][]string{nil, {"id"}}, false); got[0] != nil || !slices.Equal(got[1], []string{"k", "ts", "id"}) {
		t.Errorf("an unpruned left side reads %q (want nil: every column), the right %q (want [k ts id])", got[0], got[1])
	}
	if got := build([2][]string{{}, {}}, true); got[0] != nil {
		t.Errorf("a side deduplicated before the join reads %q, want nil (every column)", got[0])
	}
}
