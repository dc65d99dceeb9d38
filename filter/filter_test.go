package filter

import (
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
		{Not{cmp(Gt, col("gas"), num(150))}, "[true false false false]"}, // null stays unknown
		{IsNull{X: col("gas")}, "[false false true false]"},
		{IsNull{X: col("gas"), Neg: true}, "[true true false true]"},
		{In{X: col("miner"), List: []Lit{str("0xaa"), str("0xcc")}}, "[true false true true]"},
		{In{X: col("miner"), List: []Lit{str("0xaa")}, Neg: true}, "[false true false true]"},
		{In{X: col("n"), List: []Lit{num(1), {Kind: LitNull}}, Neg: true}, "[false false false false]"},
		{Or{cmp(Eq, col("miner"), str("0xbb")), cmp(Gt, col("gas"), num(300))}, "[false true false true]"},
		{Or{IsNull{X: col("gas")}, cmp(Gt, col("gas"), num(300))}, "[false false true true]"},
		{And{cmp(Ne, col("miner"), str("0xaa")), cmp(Lt, col("fee"), Lit{Kind: LitFloat, Flt: 3})}, "[false true false false]"},
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

func TestCompileErrors(t *testing.T) {
	for _, e := range []Expr{
		cmp(Gt, col("nope"), num(1)),
		cmp(Gt, col("miner"), num(1)),
		cmp(Eq, col("ts"), num(5)),
		cmp(Eq, col("ts"), str("yesterday")),
		cmp(Eq, num(1), num(1)),
		cmp(Eq, col("miner"), col("gas")),
		cmp(Eq, col("ts"), col("gas")),
		col("gas"),
		num(3),
		In{X: num(1), List: []Lit{num(1)}},
		IsNull{X: num(1)},
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
