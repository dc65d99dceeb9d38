package expr

import (
	"fmt"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestIntegerLiteralBesideDecimal: Spark's types of an integer literal
// met by a DECIMAL at a binary operator (DecimalType.fromLiteral), and the
// column rule (an INT is decimal(10,0)) everywhere else.
func TestIntegerLiteralBesideDecimal(t *testing.T) {
	cols := func(name string) (stream.Type, bool) {
		switch name {
		case "d":
			return stream.DecimalOf(12, 2), true
		case "d5":
			return stream.DecimalOf(5, 2), true
		case "i":
			return stream.Int32, true
		}
		return 0, false
	}
	d := col("d")
	for _, c := range []struct {
		e    Expr
		want string
	}{
		{Arith{Op: "*", L: d, R: i(2)}, "DECIMAL(14,2)"},    // 12+1+1, not 12+10+1
		{Arith{Op: "*", L: i(2), R: d}, "DECIMAL(14,2)"},    // either side
		{Arith{Op: "+", L: d, R: i(2)}, "DECIMAL(13,2)"},    // max(10,1)+2+1
		{Arith{Op: "-", L: d, R: i(-100)}, "DECIMAL(13,2)"}, // the sign does not count
		{Arith{Op: "+", L: d, R: Neg{X: i(100)}}, "DECIMAL(13,2)"},
		{Arith{Op: "/", L: d, R: i(2)}, "DECIMAL(16,6)"}, // s = max(6, 2+1+1), p = 10+0+6
		{Arith{Op: "%", L: d, R: i(7)}, "DECIMAL(3,2)"},
		{Arith{Op: "*", L: d, R: i(0)}, "DECIMAL(14,2)"},                             // 0 has one digit
		{Arith{Op: "*", L: d, R: i(10_000_000_000)}, "DECIMAL(24,2)"},                // a BIGINT literal, 11 digits
		{Arith{Op: "*", L: d, R: col("i")}, "DECIMAL(23,2)"},                         // a column keeps decimal(10,0)
		{Arith{Op: "*", L: dec("1.5"), R: i(2)}, "DECIMAL(4,1)"},                     // a decimal literal too
		{Arith{Op: "+", L: col("i"), R: i(2)}, "INT"},                                // no decimal: unchanged
		{call("coalesce", d, i(2)), "DECIMAL(12,2)"},                                 // unification: the INT's width
		{Arith{Op: "*", L: col("d5"), R: col("d5")}, "DECIMAL(11,4)"},                // decimal*decimal unchanged
		{Arith{Op: "*", L: Arith{Op: "+", L: d, R: i(1)}, R: i(3)}, "DECIMAL(15,2)"}, // nested
	} {
		cc, err := Compile(c.e, cols, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.e, err)
		}
		if got := cc.Type().String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.e, got, c.want)
		}
	}
}

// TestWiderDecimalPrefersIntegralDigits: a DECIMAL(38,0) compared with a
// DECIMAL literal of scale 2 compares in DECIMAL(38,0) (Spark 4's
// widerDecimalType), so a 38-digit value is compared, not refused: the
// old DECIMAL(38,2) failed the batch with NUMERIC_VALUE_OUT_OF_RANGE
// (found by TestSparkRef's DECIMAL(38,0) column, seed 166).
func TestWiderDecimalPrefersIntegralDigits(t *testing.T) {
	big, _ := stream.ParseDecimal("60000000000000000000000000000000000002", 38, 0)
	b := &stream.Batch{Len: 2, Columns: []stream.Column{{Name: "wei", Type: stream.DecimalOf(38, 0), Decimals: []stream.Dec128{big, {}}}}}
	cols := func(string) (stream.Type, bool) { return stream.DecimalOf(38, 0), true }
	for _, c := range []struct {
		e    Expr
		want string
	}{
		{Cmp{Op: Eq, L: col("wei"), R: dec("-0.01")}, "[false true]"}, // -0.01 is 0 at scale 0 (HALF_UP)
		{Cmp{Op: Gt, L: col("wei"), R: dec("1.5")}, "[true false]"},
		{call("coalesce", col("wei"), dec("2.25")), ""},
	} {
		cc, err := Compile(c.e, cols, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.e, err)
		}
		if c.want == "" {
			if got := cc.Type().String(); got != "DECIMAL(38,0)" {
				t.Errorf("%s: %s, want DECIMAL(38,0)", c.e, got)
			}
			continue
		}
		keep, err := cc.Truth(b, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.e, err)
		}
		if got := fmt.Sprint(keep); got != c.want {
			t.Errorf("%s: %s, want %s", c.e, got, c.want)
		}
	}
}
