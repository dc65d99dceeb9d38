package expr

import (
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// TestCastFloatBinary: CAST to FLOAT and BINARY with Spark's cast table
// (Cast.canAnsiCast, castToFloat, castToBinary) and its values as Spark
// shows them (Java's Float.toString); a FLOAT or BINARY result keeps its
// type and column kind, an operator reads it as DOUBLE or STRING.
func TestCastFloatBinary(t *testing.T) {
	float, binary := func(x Expr) Expr { return Cast{X: x, To: Float} }, func(x Expr) Expr { return Cast{X: x, To: Binary} }
	for _, tc := range []struct {
		name string
		e    Expr
		non  bool
		want string
		typ  string
		code string
	}{
		{name: "string to float", e: float(str("1.1")), want: "1.1 | 1.1 | 1.1", typ: "FLOAT"},
		{name: "string to float trims, takes a suffix", e: float(str(" -2.5f ")), want: "-2.5 | -2.5 | -2.5", typ: "FLOAT"},
		{name: "float read back as double", e: Cast{X: float(str("0.1")), To: Double}, want: "0.10000000149011612 | 0.10000000149011612 | 0.10000000149011612", typ: "DOUBLE"},
		{name: "bigint to float rounds once", e: float(col("x")), want: "7.0 | 9.223372E18 | NULL", typ: "FLOAT"},
		{name: "double to float", e: float(col("y")), want: "2.5 | -0.0 | 0.0", typ: "FLOAT"},
		{name: "double beyond float is infinity", e: float(f(1e40)), want: "Infinity | Infinity | Infinity", typ: "FLOAT"},
		{name: "string beyond float is infinity", e: float(str("-1e39")), want: "-Infinity | -Infinity | -Infinity", typ: "FLOAT"},
		{name: "special literals", e: float(str("NaN")), want: "NaN | NaN | NaN", typ: "FLOAT"},
		{name: "decimal to float", e: float(dec("16777217")), want: "1.6777216E7 | 1.6777216E7 | 1.6777216E7", typ: "FLOAT"},
		{name: "boolean to float", e: float(Cmp{Op: Gt, L: col("y"), R: i(0)}), want: "1.0 | 0.0 | 0.0", typ: "FLOAT"},
		{name: "float to int truncates", e: Cast{X: float(str("-1.9")), To: Int}, want: "-1 | -1 | -1", typ: "INT"},
		{name: "float to decimal", e: Cast{X: float(str("2.5")), To: Decimal(3, 1)}, want: "2.5 | 2.5 | 2.5", typ: "DECIMAL(3,1)"},
		{name: "float in arithmetic is double", e: Arith{Op: "+", L: float(str("0.1")), R: i(1)}, want: "1.1000000014901161 | 1.1000000014901161 | 1.1000000014901161", typ: "DOUBLE"},
		{name: "malformed string to float", e: float(col("s")), code: CodeCastInvalidInput},
		{name: "malformed string to float, try_cast", e: Cast{X: col("s"), To: Float, Try: true}, want: "NULL | NULL | NULL", typ: "FLOAT"},
		{name: "malformed string to float off ANSI", e: float(str("1.2.3")), non: true, want: "NULL | NULL | NULL", typ: "FLOAT"},
		{name: "date to float", e: float(call("to_date", col("t"))), code: CodeDatatypeMismatch},
		{name: "string to binary", e: binary(col("s")), want: "Miner_A |  | abc", typ: "BINARY"},
		{name: "string to binary keeps spaces", e: Cast{X: binary(str(" Spark ")), To: String}, want: " Spark  |  Spark  |  Spark ", typ: "STRING"},
		{name: "binary equals its string", e: Cmp{Op: Eq, L: binary(col("s")), R: str("abc")}, want: "false | false | true", typ: "BOOLEAN"},
		{name: "bigint to binary", e: binary(col("x")), code: CodeDatatypeMismatch},
		{name: "binary to int", e: Cast{X: binary(str("1")), To: Int}, code: CodeDatatypeMismatch},
		{name: "binary to float", e: float(binary(str("1"))), code: CodeDatatypeMismatch},
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
	// The result column is Spark's FLOAT / BINARY column.
	for _, tc := range []struct {
		e    Expr
		kind stream.Type
	}{{float(col("y")), stream.Float32}, {binary(col("s")), stream.Binary}} {
		c, err := Compile(tc.e, resolve, Options{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Eval(testBatch(), "c")
		b := &stream.Batch{Len: testBatch().Len, Columns: []stream.Column{out}}
		if err != nil || out.Type != tc.kind || b.Validate() != nil {
			t.Errorf("%s: column %v (%v)", tc.e, out.Type, err)
		}
	}
}
