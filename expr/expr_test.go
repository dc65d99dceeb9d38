package expr

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// testBatch has one row per value of x (bigint, with a null), y (double), s
// (string) and t (timestamp).
func testBatch() *stream.Batch {
	return &stream.Batch{Len: 3, Columns: []stream.Column{
		{Name: "x", Type: stream.Int64, Int64s: []int64{7, math.MaxInt64, 0}, Valid: []bool{true, true, false}},
		{Name: "y", Type: stream.Float64, Float64s: []float64{2.5, math.Copysign(0, -1), 0}},
		{Name: "s", Type: stream.String, Strings: []string{"Miner_A", "", "abc"}},
		{Name: "t", Type: stream.Timestamp, Int64s: []int64{1_700_000_123_456_789, 0, -1}},
	}}
}

func resolve(name string) (stream.Type, bool) {
	for _, c := range testBatch().Columns {
		if c.Name == name {
			return c.Type, true
		}
	}
	return 0, false
}

// render evaluates e at every row and writes the values as Spark's CAST
// AS STRING would, null as NULL.
func render(t *testing.T, e Expr, o Options) (string, Type, error) {
	t.Helper()
	c, err := Compile(e, resolve, o)
	if err != nil {
		return "", Type{}, err
	}
	v, err := c.root.eval(&ctx{b: testBatch(), n: 3, ansi: !o.NonANSI}, nil)
	if err != nil {
		return "", c.Type(), err
	}
	var parts []string
	for r := 0; r < v.n; r++ {
		if v.null(r) {
			parts = append(parts, "NULL")
			continue
		}
		parts = append(parts, format(get(v, r), v.t))
	}
	return strings.Join(parts, " | "), c.Type(), nil
}

func col(n string) Col              { return Col{Name: n} }
func i(v int64) Lit                 { return Lit{Kind: LitInt, Int: v} }
func f(v float64) Lit               { return Lit{Kind: LitFloat, Flt: v} }
func str(v string) Lit              { return Lit{Kind: LitString, Str: v} }
func dec(v string) Lit              { r, _ := new(big.Rat).SetString(v); return DecimalLit(r) }
func call(n string, a ...Expr) Call { return Call{Name: n, Args: a} }

func TestEvaluate(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Expr
		non  bool
		want string
		typ  string
		code string
	}{
		{name: "bigint plus int", e: Arith{Op: "+", L: col("x"), R: i(1)}, code: CodeArithmeticOverflow},
		{name: "bigint plus int wraps off ANSI", e: Arith{Op: "+", L: col("x"), R: i(1)}, non: true, want: "8 | -9223372036854775808 | NULL", typ: "BIGINT"},
		{name: "bigint div bigint is double", e: Arith{Op: "/", L: col("x"), R: i(2)}, want: "3.5 | 4.611686018427388E18 | NULL", typ: "DOUBLE"},
		{name: "divide by zero", e: Arith{Op: "/", L: i(1), R: col("y")}, code: CodeDivideByZero},
		{name: "divide by zero off ANSI", e: Arith{Op: "/", L: i(1), R: col("y")}, non: true, want: "0.4 | NULL | NULL", typ: "DOUBLE"},
		{name: "case guards the division", e: Case{Whens: []When{{Cond: Cmp{Op: Eq, L: col("y"), R: i(0)}, Then: i(0)}}, Else: Arith{Op: "/", L: i(1), R: col("y")}}, want: "0.4 | 0.0 | 0.0", typ: "DOUBLE"},
		{name: "int literal overflow", e: Arith{Op: "+", L: i(2147483647), R: i(1)}, code: CodeArithmeticOverflow},
		{name: "int literal overflow wraps", e: Arith{Op: "+", L: i(2147483647), R: i(1)}, non: true, want: "-2147483648 | -2147483648 | -2147483648", typ: "INT"},
		{name: "decimal times bigint", e: Arith{Op: "*", L: dec("1.5"), R: col("x")}, want: "10.5 | 13835058055282163710.5 | NULL", typ: "DECIMAL(23,1)"},
		{name: "decimal division scale", e: Arith{Op: "/", L: dec("1"), R: dec("3")}, want: "0.333333 | 0.333333 | 0.333333", typ: "DECIMAL(7,6)"},
		{name: "integral divide", e: Arith{Op: "div", L: i(-7), R: i(2)}, want: "-3 | -3 | -3", typ: "BIGINT"},
		{name: "remainder sign follows dividend", e: Arith{Op: "%", L: i(-7), R: i(3)}, want: "-1 | -1 | -1", typ: "INT"},
		{name: "coalesce", e: call("coalesce", col("x"), i(-1)), want: "7 | 9223372036854775807 | -1", typ: "BIGINT"},
		{name: "nullif", e: call("nullif", col("s"), str("")), want: "Miner_A | NULL | abc", typ: "STRING"},
		{name: "if", e: call("if", Cmp{Op: Gt, L: col("y"), R: i(1)}, str("big"), str("small")), want: "big | small | small", typ: "STRING"},
		{name: "cast string to bigint invalid", e: Cast{X: col("s"), To: BigInt}, code: CodeCastInvalidInput},
		{name: "try_cast", e: Cast{X: col("s"), To: BigInt, Try: true}, want: "NULL | NULL | NULL", typ: "BIGINT"},
		{name: "cast double to int overflow", e: Cast{X: f(3e9), To: Int}, code: CodeCastOverflow},
		{name: "cast double to int saturates off ANSI", e: Cast{X: f(3e9), To: Int}, non: true, want: "2147483647 | 2147483647 | 2147483647", typ: "INT"},
		{name: "cast timestamp to string", e: Cast{X: col("t"), To: String}, want: "2023-11-14 22:15:23.456789 | 1970-01-01 00:00:00 | 1969-12-31 23:59:59.999999", typ: "STRING"},
		{name: "cast timestamp to bigint floors", e: Cast{X: col("t"), To: BigInt}, want: "1700000123 | 0 | -1", typ: "BIGINT"},
		{name: "cast double to string", e: Cast{X: Arith{Op: "*", L: col("y"), R: f(1e7)}, To: String}, want: "2.5E7 | -0.0 | 0.0", typ: "STRING"},
		{name: "cast decimal rounds half up", e: Cast{X: dec("2.345"), To: Decimal(3, 2)}, want: "2.35 | 2.35 | 2.35", typ: "DECIMAL(3,2)"},
		{name: "date_trunc hour", e: call("date_trunc", str("HOUR"), col("t")), want: "2023-11-14 22:00:00 | 1970-01-01 00:00:00 | 1969-12-31 23:00:00", typ: "TIMESTAMP"},
		{name: "date_trunc bad unit is null", e: call("date_trunc", str("fortnight"), col("t")), want: "NULL | NULL | NULL", typ: "TIMESTAMP"},
		{name: "to_date", e: call("to_date", col("t")), want: "2023-11-14 | 1970-01-01 | 1969-12-31", typ: "DATE"},
		{name: "dayofweek", e: call("dayofweek", col("t")), want: "3 | 5 | 4", typ: "INT"},
		{name: "timestamp plus interval", e: Arith{Op: "+", L: col("t"), R: Interval{Micros: 3_600_000_000}}, want: "2023-11-14 23:15:23.456789 | 1970-01-01 01:00:00 | 1970-01-01 00:59:59.999999", typ: "TIMESTAMP"},
		{name: "lower substring", e: call("lower", call("substring", col("s"), i(1), i(5))), want: "miner |  | abc", typ: "STRING"},
		{name: "substring at a computed position", e: call("substring", col("s"), Arith{Op: "-", L: call("length", col("s")), R: i(1)}, i(2)), want: "_A |  | bc", typ: "STRING"},
		{name: "date_trunc month", e: call("date_trunc", str("mon"), col("t")), want: "2023-11-01 00:00:00 | 1970-01-01 00:00:00 | 1969-12-01 00:00:00", typ: "TIMESTAMP"},
		{name: "substring negative", e: call("substr", col("s"), i(-2)), want: "_A |  | bc", typ: "STRING"},
		{name: "concat with null", e: call("concat", col("s"), Cast{X: col("x"), To: String}), want: "Miner_A7 | 9223372036854775807 | NULL", typ: "STRING"},
		{name: "concat_ws skips null", e: call("concat_ws", str("-"), col("s"), Cast{X: col("x"), To: String}), want: "Miner_A-7 | -9223372036854775807 | abc", typ: "STRING"},
		{name: "lpad", e: call("lpad", col("s"), i(4), str("xy")), want: "Mine | xyxy | xabc", typ: "STRING"},
		{name: "like", e: Like{Op: "like", X: col("s"), Pattern: str("M%\\_A")}, want: "true | false | false", typ: "BOOLEAN"},
		{name: "rlike", e: Like{Op: "rlike", X: col("s"), Pattern: str("^[a-z]+$")}, want: "false | false | true", typ: "BOOLEAN"},
		{name: "regexp_extract", e: call("regexp_extract", col("s"), str("(\\w+)_(\\w)"), i(2)), want: "A |  | ", typ: "STRING"},
		{name: "round half up", e: call("round", f(2.675), i(2)), want: "2.68 | 2.68 | 2.68", typ: "DOUBLE"},
		{name: "bround half even", e: call("bround", f(2.5)), want: "2.0 | 2.0 | 2.0", typ: "DOUBLE"},
		{name: "round negative scale", e: call("round", i(1250), Neg{X: i(2)}), want: "1300 | 1300 | 1300", typ: "INT"},
		{name: "floor double", e: call("floor", f(-2.5)), want: "-3 | -3 | -3", typ: "BIGINT"},
		{name: "ceil decimal", e: call("ceil", dec("2.01")), want: "3 | 3 | 3", typ: "DECIMAL(2,0)"},
		{name: "greatest skips null", e: call("greatest", col("x"), i(8)), want: "8 | 9223372036854775807 | 8", typ: "BIGINT"},
		{name: "ln of zero is null", e: call("ln", col("y")), want: "0.9162907318741551 | NULL | NULL", typ: "DOUBLE"},
		{name: "hex of a long", e: call("hex", i(-1)), want: "FFFFFFFFFFFFFFFF | FFFFFFFFFFFFFFFF | FFFFFFFFFFFFFFFF", typ: "STRING"},
		{name: "conv", e: call("conv", str("ff"), i(16), i(10)), want: "255 | 255 | 255", typ: "STRING"},
		{name: "in with null", e: In{X: col("x"), List: []Lit{i(1), {Kind: LitNull}}}, want: "NULL | NULL | NULL", typ: "BOOLEAN"},
		{name: "and short-circuits", e: And{L: Cmp{Op: Ne, L: col("y"), R: i(0)}, R: Cmp{Op: Gt, L: Arith{Op: "/", L: i(1), R: col("y")}, R: i(0)}}, want: "true | false | false", typ: "BOOLEAN"},
		{name: "string compared with bigint", e: Cmp{Op: Eq, L: col("x"), R: str("7")}, want: "true | false | NULL", typ: "BOOLEAN"},
		{name: "abs overflow", e: call("abs", Neg{X: col("x")}), want: "7 | 9223372036854775807 | NULL", typ: "BIGINT"},
		{name: "nan equals nan", e: Cmp{Op: Eq, L: Cast{X: str("NaN"), To: Double}, R: Cast{X: str("nan"), To: Double}}, want: "true | true | true", typ: "BOOLEAN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, typ, err := render(t, tc.e, Options{NonANSI: tc.non})
			if tc.code != "" {
				if errcode.Code(err) != tc.code {
					t.Fatalf("%s: got %q, %v; want error %s", tc.e, got, err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.e, err)
			}
			if got != tc.want || typ.String() != tc.typ {
				t.Fatalf("%s:\n got %s (%s)\nwant %s (%s)", tc.e, got, typ, tc.want, tc.typ)
			}
		})
	}
}

func TestUnknownFunctionListsWhatExists(t *testing.T) {
	_, err := Compile(call("levenshtein", col("s"), str("a")), resolve, Options{})
	if errcode.Code(err) != CodeUnresolvedRoutine || !strings.Contains(err.Error(), "levenshtein") || !strings.Contains(err.Error(), "date_trunc") {
		t.Fatalf("got %v", err)
	}
}
