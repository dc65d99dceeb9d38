package filter

import (
	"context"
	"fmt"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

func testTypes(name string) (stream.Type, bool) {
	switch name {
	case "n", "gas":
		return stream.Int64, true
	case "ts":
		return stream.Timestamp, true
	case "fee":
		return stream.Float64, true
	case "miner", "source":
		return stream.String, true
	}
	return 0, false
}

// testBatch has four rows; gas is null in row 2, fee in row 3.
func testBatch() *stream.Batch {
	return &stream.Batch{Len: 4, Columns: []stream.Column{
		{Name: "n", Type: stream.Int64, Int64s: []int64{1, 2, 3, 4}},
		{Name: "gas", Type: stream.Int64, Int64s: []int64{100, 200, 0, 400}, Valid: []bool{true, true, false, true}},
		{Name: "ts", Type: stream.Timestamp, Int64s: []int64{1704067200000000, 1704067260000000, 1704153600000000, 1704240000000000}},
		{Name: "fee", Type: stream.Float64, Float64s: []float64{1.5, 2.5, 3.5, 0}, Valid: []bool{true, true, true, false}},
		{Name: "miner", Type: stream.String, Strings: []string{"0xaa", "0xbb", "0xaa", "0xcc"}},
	}}
}

func col(n string) Col             { return Col{Name: n} }
func num(i int64) Lit              { return Lit{Kind: LitInt, Int: i} }
func str(s string) Lit             { return Lit{Kind: LitString, Str: s} }
func cmp(op CmpOp, l, r Expr) Expr { return Cmp{Op: op, L: l, R: r} }

func TestKeep(t *testing.T) {
	for _, tc := range []struct {
		e    Expr
		want string
	}{
		{cmp(Gt, col("gas"), num(150)), "[false true false true]"},
		{cmp(Le, num(150), col("gas")), "[false true false true]"},
		{Not{X: cmp(Gt, col("gas"), num(150))}, "[true false false false]"}, // null stays unknown
		{IsNull{X: col("gas")}, "[false false true false]"},
		{IsNull{X: col("gas"), Neg: true}, "[true true false true]"},
		{In{X: col("miner"), List: []Lit{str("0xaa"), str("0xcc")}}, "[true false true true]"},
		{In{X: col("miner"), List: []Lit{str("0xaa")}, Neg: true}, "[false true false true]"},
		{In{X: col("n"), List: []Lit{num(1), {Kind: LitNull}}, Neg: true}, "[false false false false]"},
		{Or{L: cmp(Eq, col("miner"), str("0xbb")), R: cmp(Gt, col("gas"), num(300))}, "[false true false true]"},
		{Or{L: IsNull{X: col("gas")}, R: cmp(Gt, col("gas"), num(300))}, "[false false true true]"},
		{And{L: cmp(Ne, col("miner"), str("0xaa")), R: cmp(Lt, col("fee"), Lit{Kind: LitFloat, Flt: 3})}, "[false true false false]"},
		{cmp(Ge, col("ts"), str("2024-01-02")), "[false false true true]"},
		{cmp(Lt, col("ts"), str("2024-01-01 00:01:00")), "[true false false false]"},
		{cmp(Gt, col("gas"), Lit{Kind: LitFloat, Flt: 199.5}), "[false true false true]"},
		{cmp(Gt, col("fee"), num(2)), "[false true true false]"},
		{cmp(Lt, col("n"), col("gas")), "[true true false true]"},
		{Lit{Kind: LitBool, Bool: true}, "[true true true true]"},
	} {
		p, err := Compile(tc.e, testTypes)
		if err != nil {
			t.Fatalf("%s: %v", tc.e, err)
		}
		got, err := p.Keep(testBatch())
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("%s: keep %v, want %s", tc.e, got, tc.want)
		}
	}
}

// TestConstantConditions: a condition over literals only is valid SQL
// (Spark folds it); package expr compiles it.
func TestConstantConditions(t *testing.T) {
	b := &stream.Batch{Len: 1, Columns: []stream.Column{{Name: "gas", Type: stream.Int64, Int64s: []int64{1}}}}
	for _, tc := range []struct {
		e    Expr
		want bool
	}{
		{cmp(Eq, num(1), num(1)), true},
		{In{X: num(1), List: []Lit{num(2)}}, false},
		{IsNull{X: num(1)}, false},
	} {
		e, want := tc.e, tc.want
		p, err := Compile(e, testTypes)
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		keep, err := p.Keep(b)
		if err != nil || keep[0] != want {
			t.Errorf("%s: keep %v, %v; want %v", e, keep, err, want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, e := range []Expr{
		cmp(Gt, col("nope"), num(1)),
		cmp(Gt, col("miner"), num(1)),
		cmp(Eq, col("ts"), num(5)),
		cmp(Eq, col("ts"), str("yesterday")),
		cmp(Eq, col("miner"), col("gas")),
		cmp(Eq, col("ts"), col("gas")),
		col("gas"),
		num(3),
	} {
		_, err := Compile(e, testTypes)
		if errcode.Code(err) != CodeFilterInvalid {
			t.Errorf("%s: error %v, want %s", e, err, CodeFilterInvalid)
		}
	}
	// A string that is no number, against a number column, is Spark's
	// CAST_INVALID_INPUT under ANSI (it was FILTER_INVALID before strings
	// were cast as Spark casts them).
	if _, err := Compile(cmp(Eq, col("gas"), str("x")), testTypes); errcode.Code(err) != CodeCastInvalidInput {
		t.Errorf("gas = 'x': error %v, want %s", err, CodeCastInvalidInput)
	}
}

// recorder is an operator that keeps what Process handed it.
type recorder struct {
	stream.Operator
	rows  []int64
	signs []int8
}

func (r *recorder) Process(_ context.Context, _, _ int64, in *stream.Batch) error {
	if in.Len == 0 {
		return nil
	}
	r.rows = append(r.rows, in.Column("n").Int64s...)
	for i := 0; i < in.Len; i++ {
		r.signs = append(r.signs, in.Sign(i))
	}
	return in.Validate()
}

func TestOperatorFiltersBeforeInner(t *testing.T) {
	p, err := Compile(Or{L: cmp(Eq, col("miner"), str("0xaa")), R: IsNull{X: col("fee")}}, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	op := &Operator{Pred: p, Inner: rec}
	b := testBatch()
	b.Signs = []int8{1, 1, -1, 1}
	if err := op.Process(context.Background(), 0, 0, b); err != nil {
		t.Fatal(err)
	}
	none, _ := Compile(cmp(Eq, col("miner"), str("0xdd")), testTypes)
	op.Pred = none
	if err := op.Process(context.Background(), 0, 0, testBatch()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rec.rows, rec.signs) != "[1 3 4] [1 -1 1]" {
		t.Fatalf("inner saw rows %v signs %v", rec.rows, rec.signs)
	}
}

// optional implements every optional operator interface and records calls.
type optional struct {
	recorder
	calls []string
}

func (o *optional) PrepareCommit(_ context.Context, id int64) error {
	o.calls = append(o.calls, fmt.Sprint("prepare ", id))
	return nil
}
func (o *optional) NextWatermark(id, ms int64) {
	o.calls = append(o.calls, fmt.Sprint("next ", id, " ", ms))
}
func (o *optional) CheckPartitions(from, to int) error {
	o.calls = append(o.calls, fmt.Sprint("partitions ", from, " ", to))
	return fmt.Errorf("limit")
}

// TestOperatorForwardsOptionalInterfaces: a filtered query keeps its
// operator's optional interfaces (the state's prepared commit, the
// watermark lookahead that leaves closed keys out of state, the partition
// limit); without them in Inner the wrapper does what the engine does
// without them.
func TestOperatorForwardsOptionalInterfaces(t *testing.T) {
	ctx := context.Background()
	in := &optional{}
	op := &Operator{Inner: in}
	if err := op.PrepareCommit(ctx, 3); err != nil {
		t.Fatal(err)
	}
	op.NextWatermark(3, 42)
	if err := op.CheckPartitions(1, 2); err == nil || err.Error() != "limit" {
		t.Fatalf("CheckPartitions: %v", err)
	}
	if got := fmt.Sprint(in.calls); got != "[prepare 3 next 3 42 partitions 1 2]" {
		t.Fatalf("Inner got %s", got)
	}
	bare := &Operator{Inner: &recorder{}}
	bare.NextWatermark(1, 1)
	if err := bare.PrepareCommit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := bare.CheckPartitions(1, 10000); err != nil {
		t.Fatal(err)
	}
}

// TestKeepTypedColumns: a simple comparison over a column of a type the
// simple evaluator does not hold (DECIMAL, BOOLEAN, DATE, INT) runs on
// package expr; the simple evaluator read such columns as strings
// (nothing matched, or a nil slice panicked).
func TestKeepTypedColumns(t *testing.T) {
	b := &stream.Batch{Len: 3, Columns: []stream.Column{
		{Name: "amt", Type: stream.DecimalOf(10, 2), Decimals: []stream.Dec128{stream.Dec128Of(1050), stream.Dec128Of(-5), stream.Dec128Of(99999)}},
		{Name: "flag", Type: stream.Boolean, Int64s: []int64{1, 0, 1}},
		{Name: "day", Type: stream.Date, Int64s: []int64{19000, 19001, 19002}},
		{Name: "k", Type: stream.Int32, Int64s: []int64{5, 6, 7}}}}
	types := func(name string) (stream.Type, bool) {
		c := b.Column(name)
		if c == nil {
			return 0, false
		}
		return c.Type, true
	}
	for _, tc := range []struct {
		e    Expr
		want string
	}{
		{cmp(Gt, col("amt"), num(10)), "[true false true]"},
		{cmp(Eq, col("flag"), Lit{Kind: LitBool, Bool: true}), "[true false true]"},
		{cmp(Ge, col("day"), str("2022-01-09")), "[false true true]"},
		{In{X: col("k"), List: []Lit{num(5), num(7)}}, "[true false true]"},
	} {
		p, err := Compile(tc.e, types)
		if err != nil {
			t.Fatalf("%s: %v", tc.e, err)
		}
		got, err := p.Keep(b)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("%s: keep %v, want %s", tc.e, got, tc.want)
		}
	}
}
