package sparkref

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethstream/ethstream/stream"
)

var testSchema = []Column{{Name: "n", Type: stream.Int64}, {Name: "ts", Type: stream.Timestamp}, {Name: "m", Type: stream.String}}

func at(hhmm string) int64 {
	t, err := time.Parse("2006-01-02 15:04", "2024-01-01 "+hhmm)
	if err != nil {
		panic(err)
	}
	return t.UnixMicro()
}

func rows(t testing.TB, r Result) string {
	t.Helper()
	if r.Fail != nil {
		return fmt.Sprintf("fail %s batch %d", r.Fail.Code, r.Fail.Batch)
	}
	s := ""
	for _, x := range r.Rows {
		s += fmt.Sprint(x.Values[2:]) + ";"
	}
	return s
}

// TestOracleWorkedExample is query/doc.go's evaluation-order example, by
// hand: WHERE n < 100 with a 1-hour watermark; batch 0 reads 00:10, 01:10
// and block 1000 at 10:00 (dropped by the pushed conjunct, so it does not
// raise the watermark); batch 1 reads 00:20 (not late: it drops by batch
// 0's watermark, none) and batch 2 00:30, whose window [00:00, 01:00) is
// still open (batch 1's watermark is 00:10). With the conjunct on ts
// instead, 10:00 stays above the watermark and closes the window from
// batch 2 on.
func TestOracleWorkedExample(t *testing.T) {
	batches := [][]Row{{{int64(1), at("00:10"), "a"}, {int64(2), at("01:10"), "a"}, {int64(1000), at("10:00"), "a"}},
		{{int64(3), at("00:20"), "a"}}, {{int64(4), at("00:30"), "a"}}}
	q := &Query{Window: &Window{Column: "ts", Size: time.Hour, Slide: time.Hour}, Aggs: []Agg{{Func: "count"}},
		Where: Cmp{Op: "<", L: Col{Name: "n"}, R: Lit{Kind: LitBigint, Int: 100}}, Watermark: time.Hour, WatermarkColumn: "ts"}
	if got := rows(t, Evaluate(q, testSchema, batches)); got != "[3];[1];" {
		t.Errorf("pushed: %s", got)
	}
	q.Where = Or{L: q.Where, R: Cmp{Op: "<", L: Col{Name: "ts"}, R: Lit{Kind: LitTimestamp, Int: at("00:00")}}}
	if got := rows(t, Evaluate(q, testSchema, batches)); got != "[2];[1];" {
		t.Errorf("not pushed: %s", got)
	}
}

// TestOracleSemantics: sliding windows with a startTime, the late rule at
// end == watermark, nulls in keys and aggregates, three-valued NOT IN,
// exact BIGINT/DECIMAL and double comparisons, ANSI overflow and wrap.
func TestOracleSemantics(t *testing.T) {
	w := &Window{Column: "ts", Size: 10 * time.Minute, Slide: 5 * time.Minute, Start: time.Minute}
	got := (&evaluator{q: &Query{Window: w}, idx: map[string]int{"n": 0, "ts": 1, "m": 2}}).instances(Row{nil, at("00:06"), nil})
	if fmt.Sprint(got) != fmt.Sprint([]instance{{at("00:01"), at("00:11")}, {at("00:06"), at("00:16")}}) {
		t.Errorf("instances of 00:06: %v", got)
	}
	// A row at 00:30 sets batch 1's watermark to 00:00 (a 30-minute
	// delay). Batch 1 drops input late by batch 0's watermark (none, Spark
	// 3.4+), so its row of [23:50, 00:00), whose end is at batch 1's own
	// watermark, is kept (and evicted); its row at 00:40 sets batch 2's to
	// 00:10. Batch 2 drops by batch 1's, 00:00: a row of [00:00, 00:10) is
	// kept, one of [23:50, 00:00) ends at that watermark: late.
	q := &Query{Window: &Window{Column: "ts", Size: 10 * time.Minute, Slide: 10 * time.Minute}, Aggs: []Agg{{Func: "count"}}, Watermark: 30 * time.Minute, WatermarkColumn: "ts"}
	r := Evaluate(q, testSchema, [][]Row{{{int64(1), at("00:30"), "a"}},
		{{int64(1), at("00:00") - 1, "a"}, {int64(1), at("00:40"), "a"}},
		{{int64(1), at("00:10") - 1, "a"}, {int64(1), at("00:00") - 1, "a"}}})
	if rows(t, r) != "[1];[1];[1];[1];" || r.Late != 1 {
		t.Errorf("late by the previous batch's watermark, at end == watermark: %s late %d", rows(t, r), r.Late)
	}
	// Null keys group; aggregates skip nulls; an all-null group is null.
	q = &Query{Keys: []string{"m"}, Aggs: []Agg{{Func: "count"}, {Func: "count", Column: "n"}, {Func: "sum", Column: "n"}, {Func: "avg", Column: "n"}, {Func: "min", Column: "n"}}, ANSI: true}
	r = Evaluate(q, testSchema, [][]Row{{{nil, int64(0), nil}, {int64(4), int64(0), nil}, {nil, int64(0), "b"}}})
	if got := fmt.Sprint(r.Rows); got != `[{"b" [b 1 0 <nil> <nil> <nil>]} {NULL [<nil> 2 1 4 4 4]}]` {
		t.Errorf("nulls: %s", got)
	}
	// n NOT IN (1, null) is never true; 5 < 5.5 exactly; 2^62+3 = 2^62 as doubles.
	b62 := int64(1) << 62
	for _, c := range []struct {
		e    Expr
		n    int64
		want tri
	}{
		{In{X: Col{Name: "n"}, List: []Lit{{Kind: LitBigint, Int: 1}, {Kind: LitNull}}, Not: true}, 2, tNull},
		{In{X: Col{Name: "n"}, List: []Lit{{Kind: LitBigint, Int: 1}, {Kind: LitNull}}, Not: true}, 1, tFalse},
		{Cmp{Op: "<", L: Col{Name: "n"}, R: decimal(11, 2)}, 5, tTrue},
		{Cmp{Op: "=", L: Col{Name: "n"}, R: Lit{Kind: LitDouble, Float: float64(b62)}}, b62 + 3, tTrue},
		{Cmp{Op: "=", L: Col{Name: "n"}, R: Lit{Kind: LitBigint, Int: b62}}, b62 + 3, tFalse},
		{In{X: Col{Name: "n"}, List: []Lit{{Kind: LitBigint, Int: b62}, {Kind: LitDouble, Float: 1}}}, b62 + 3, tTrue},
		{Cmp{Op: ">", L: Lit{Kind: LitString, Str: " 7 "}, R: Col{Name: "n"}}, 6, tTrue},
	} {
		ev := newEvaluator(&Query{ANSI: true}, testSchema)
		if got := ev.eval(c.e, Row{c.n, int64(0), "x"}); got != c.want {
			t.Errorf("%#v at n=%d: %d, want %d", c.e, c.n, got, c.want)
		}
	}
	// Two values near 2^62 leave BIGINT: ANSI fails the batch, else wraps.
	q = &Query{Aggs: []Agg{{Func: "sum", Column: "n"}}, ANSI: true}
	in := [][]Row{{{b62, int64(0), nil}}, {{b62, int64(0), nil}, {b62, int64(0), nil}}}
	if got := rows(t, Evaluate(q, testSchema, in)); got != "fail ARITHMETIC_OVERFLOW batch 1" {
		t.Errorf("ANSI overflow: %s", got)
	}
	q.ANSI = false
	if r := Evaluate(q, testSchema, in); r.Fail != nil || r.Rows[0].Values[0] != int64(3*b62) { // wraps
		t.Errorf("wrap: %v", r)
	}
}

func decimal(num, den int64) Lit {
	l := Lit{Kind: LitDecimal}
	l.Dec = new(big.Rat).SetFrac64(num, den)
	return l
}

// TestOracleQuietTrigger: a batch without rows between two data batches is
// the no-data batch Spark runs when the watermark moved. A row at 00:30
// (30-minute delay) sets the next watermark to 00:00; a row of the window
// [23:50, 00:00) in the next data batch is kept when that batch follows
// batch 0 directly (it drops by batch 0's watermark, none) and late after
// a quiet trigger, whose no-data batch ran at 00:00.
func TestOracleQuietTrigger(t *testing.T) {
	q := &Query{Window: &Window{Column: "ts", Size: 10 * time.Minute, Slide: 10 * time.Minute}, Aggs: []Agg{{Func: "count"}},
		Watermark: 30 * time.Minute, WatermarkColumn: "ts", Mode: "update"}
	first, late := []Row{{int64(1), at("00:30"), "a"}}, []Row{{int64(1), at("00:00") - 1, "a"}}
	if r := Evaluate(q, testSchema, [][]Row{first, late}); r.Late != 0 || rows(t, r) != "[1];[1];" {
		t.Errorf("consecutive data batches: %s late %d", rows(t, r), r.Late)
	}
	if r := Evaluate(q, testSchema, [][]Row{first, nil, late}); r.Late != 1 || rows(t, r) != "[1];" {
		t.Errorf("after a quiet trigger: %s late %d", rows(t, r), r.Late)
	}
	// A second quiet trigger, the watermark unmoved, changes nothing.
	if r := Evaluate(q, testSchema, [][]Row{first, nil, nil, late}); r.Late != 1 || rows(t, r) != "[1];" {
		t.Errorf("after two quiet triggers: %s late %d", rows(t, r), r.Late)
	}
}
