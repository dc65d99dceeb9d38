package expr

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

func nullLit() Lit { return Lit{Kind: LitNull} }

// evalText evaluates e over b and renders each row as Spark's CAST AS
// STRING does (arrays as [a, b, null]), NULL for a null.
func evalText(b *stream.Batch, e Expr, ansi bool) ([]string, error) {
	c, err := Compile(e, func(name string) (stream.Type, bool) {
		if col := b.Column(name); col != nil {
			return col.Type, true
		}
		return 0, false
	}, Options{NonANSI: !ansi})
	if err != nil {
		return nil, err
	}
	col, err := c.Eval(b, "out")
	if err != nil {
		return nil, err
	}
	if err := (&stream.Batch{Len: b.Len, Columns: []stream.Column{col}}).Validate(); err != nil {
		return nil, fmt.Errorf("invalid column: %w", err)
	}
	v := fromColumn(&col, b.Len)
	out := make([]string, b.Len)
	for r := range out {
		switch {
		case v.null(r):
			out[r] = "NULL"
		case v.t.IsArray():
			out[r] = arrayText(v, r)
		default:
			out[r] = format(get(v, r), v.t)
		}
	}
	return out, nil
}

// TestArraySparkExamples: the examples of Spark's function reference
// (sql-ref functions, element_at, try_element_at, get, size,
// array_contains, split, array) and of its error classes' documentation,
// under ANSI on and off.
func TestArraySparkExamples(t *testing.T) {
	one := &stream.Batch{Len: 1, Columns: []stream.Column{{Name: "k", Type: stream.Int64, Int64s: []int64{0}}}}
	arr := call("array", i(1), i(2), i(3))
	for _, c := range []struct {
		e            Expr
		ansi, legacy string // the result (or error code) with ANSI on and off
	}{
		{call("element_at", arr, i(2)), "2", "2"},
		{call("element_at", arr, i(-1)), "3", "3"},
		{call("element_at", arr, i(4)), CodeInvalidArrayIndexInElementAt, "NULL"},
		{call("element_at", arr, i(-4)), CodeInvalidArrayIndexInElementAt, "NULL"},
		{call("element_at", arr, i(0)), CodeInvalidIndexOfZero, CodeInvalidIndexOfZero},
		{call("try_element_at", arr, i(4)), "NULL", "NULL"},
		{call("try_element_at", arr, i(-3)), "1", "1"},
		{call("try_element_at", arr, i(0)), CodeInvalidIndexOfZero, CodeInvalidIndexOfZero},
		{Index{X: arr, I: i(0)}, "1", "1"},
		{Index{X: arr, I: i(2)}, "3", "3"},
		{Index{X: arr, I: i(3)}, CodeInvalidArrayIndex, "NULL"},
		{Index{X: arr, I: i(-1)}, CodeInvalidArrayIndex, "NULL"},
		{Index{X: arr, I: nullLit()}, "NULL", "NULL"},
		{call("get", arr, i(0)), "1", "1"},
		{call("get", arr, i(3)), "NULL", "NULL"},
		{call("get", arr, i(-1)), "NULL", "NULL"},
		{call("size", call("array", str("b"), str("d"), str("c"), str("a"))), "4", "4"},
		{call("cardinality", call("array", str("b"), str("d"), str("c"), str("a"))), "4", "4"},
		{call("array_size", call("array", str("b"), str("d"), str("c"), str("a"))), "4", "4"},
		{call("size", call("array")), "0", "0"},
		{call("size", call("split", nullLit(), str(","))), "NULL", "-1"},
		{call("array_size", call("split", nullLit(), str(","))), "NULL", "NULL"},
		{call("array_contains", arr, i(2)), "true", "true"},
		{call("array_contains", arr, i(5)), "false", "false"},
		{call("array_contains", call("array", i(1), nullLit()), i(1)), "true", "true"},
		{call("array_contains", call("array", i(1), nullLit()), i(3)), "NULL", "NULL"},
		// Spark compares with its ordering, where NaN equals NaN and -0.0 equals 0.0.
		{call("array_contains", call("array", f(1), Cast{X: str("NaN"), To: Double}), Cast{X: str("NaN"), To: Double}), "true", "true"},
		{call("array_contains", call("array", i(1), Cast{X: str("NaN"), To: Double}), Cast{X: str("NaN"), To: Double}), "true", "true"},
		{call("array_contains", call("array", f(0)), f(math.Copysign(0, -1))), "true", "true"},
		{call("array_contains", arr, nullLit()), "NULL", "NULL"},
		{call("array_contains", arr, f(2.0)), "true", "true"},
		{call("split", str("oneAtwoBthreeC"), str("[ABC]")), "[one, two, three, ]", "[one, two, three, ]"},
		{call("split", str("oneAtwoBthreeC"), str("[ABC]"), i(-1)), "[one, two, three, ]", "[one, two, three, ]"},
		{call("split", str("oneAtwoBthreeC"), str("[ABC]"), i(2)), "[one, twoBthreeC]", "[one, twoBthreeC]"},
		{call("split", str("oneAtwoBthreeC"), str("[ABC]"), i(0)), "[one, two, three, ]", "[one, two, three, ]"},
		{call("split", str("hello"), str("")), "[h, e, l, l, o]", "[h, e, l, l, o]"},
		{call("split", str("hello"), str(""), i(2)), "[h, ello]", "[h, ello]"},
		{call("split", str(""), str(",")), "[]", "[]"},
		{call("split", str(",a,"), str(",")), "[, a, ]", "[, a, ]"},
		{call("split", str("abc"), str("x")), "[abc]", "[abc]"},
		// docs/contracts.md's difference: Go skips the empty match after ",".
		{call("split", str("a,b"), str(",*")), "[a, b, ]", "[a, b, ]"},
		{call("array", i(1), nullLit(), f(2.5)), "[1.0, null, 2.5]", "[1.0, null, 2.5]"},
		{Index{X: call("split", str("0xddf2,0xaa"), str(",")), I: i(0)}, "0xddf2", "0xddf2"},
	} {
		for _, mode := range []struct {
			ansi bool
			want string
		}{{true, c.ansi}, {false, c.legacy}} {
			got, err := evalText(one, c.e, mode.ansi)
			res := ""
			if err != nil {
				res = errcode.Code(err)
				if res == "" {
					res = err.Error()
				}
			} else {
				res = got[0]
			}
			if res != mode.want {
				t.Errorf("%s (ansi=%v): %s (%v), want %s", c.e, mode.ansi, res, err, mode.want)
			}
		}
	}
}

// TestArrayTypeErrors: arrays do not mix with scalars where Spark would
// need a cast ethstream does not have, and the array functions take
// arrays.
func TestArrayTypeErrors(t *testing.T) {
	arr := call("array", i(1))
	for _, e := range []Expr{
		Cmp{Op: Eq, L: arr, R: arr},
		Cast{X: arr, To: String},
		call("concat", arr),
		call("coalesce", arr, arr),
		call("size", i(1)),
		call("element_at", arr, str("x")),
		Index{X: i(1), I: i(0)},
		call("array_contains", arr, str("x")),
		call("array", i(1), str("x")),
	} {
		_, err := Compile(e, func(string) (stream.Type, bool) { return 0, false }, Options{})
		if errcode.Code(err) != CodeDatatypeMismatch {
			t.Errorf("%s: %v, want %s", e, err, CodeDatatypeMismatch)
		}
	}
}

// naive is an independent model of an array<bigint> row: nil is a null
// array, a nil element a null element.
type naive []*int64

// naiveElement is Spark's element access by the function's documentation:
// mode "[]" and "get" 0-based, "element_at" and "try" 1-based from either
// end. It returns the value (nil: NULL) or the error class.
func naiveElement(a naive, isNull bool, i *int64, mode string, ansi bool) (*int64, string) {
	if isNull || i == nil {
		return nil, ""
	}
	n := int64(len(a))
	switch mode {
	case "[]", "get":
		if *i >= 0 && *i < n {
			return a[*i], ""
		}
		if mode == "[]" && ansi {
			return nil, CodeInvalidArrayIndex
		}
		return nil, ""
	}
	if *i == 0 {
		return nil, CodeInvalidIndexOfZero
	}
	if *i > n || -*i > n {
		if mode == "element_at" && ansi {
			return nil, CodeInvalidArrayIndexInElementAt
		}
		return nil, ""
	}
	if *i > 0 {
		return a[*i-1], ""
	}
	return a[n+*i], ""
}

// TestArrayFunctionsRandom checks element access, size and array_contains
// on random arrays with null arrays, empty arrays and null elements
// against the naive model, in both ANSI modes: the values where no row
// fails, the first failing row's error class where one does.
func TestArrayFunctionsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for iter := 0; iter < 300; iter++ {
		n := 1 + r.IntN(8)
		arrs := make([]naive, n)
		nulls := make([]bool, n)
		idx := make([]*int64, n)
		vals := make([]*int64, n)
		col := stream.MakeColumn("a", stream.ArrayOf(stream.Int64), 0, n)
		col.Offsets = col.Offsets[:1]
		valid := make([]bool, n)
		evalid := []bool{}
		ic := stream.Column{Name: "i", Type: stream.Int64, Valid: make([]bool, n)}
		vc := stream.Column{Name: "v", Type: stream.Int64, Valid: make([]bool, n)}
		for k := range n {
			nulls[k] = r.IntN(6) == 0
			valid[k] = !nulls[k]
			if !nulls[k] {
				for range r.IntN(5) {
					var e *int64
					x := r.Int64N(5)
					if r.IntN(5) > 0 {
						e = &x
					}
					arrs[k] = append(arrs[k], e)
					col.Elems.Int64s = append(col.Elems.Int64s, x)
					evalid = append(evalid, e != nil)
				}
			}
			col.Offsets = append(col.Offsets, int32(len(col.Elems.Int64s)))
			x, y := r.Int64N(13)-6, r.Int64N(6)
			ic.Int64s, vc.Int64s = append(ic.Int64s, x), append(vc.Int64s, y)
			if r.IntN(8) > 0 {
				idx[k], ic.Valid[k] = &x, true
			}
			if r.IntN(8) > 0 {
				vals[k], vc.Valid[k] = &y, true
			}
		}
		col.Valid, col.Elems.Valid = valid, evalid
		b := &stream.Batch{Len: n, Columns: []stream.Column{col, ic, vc}}
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		show := func(p *int64) string {
			if p == nil {
				return "NULL"
			}
			return fmt.Sprint(*p)
		}
		for _, ansi := range []bool{true, false} {
			for _, m := range []struct {
				mode string
				e    Expr
			}{
				{"[]", Index{X: col1("a"), I: col1("i")}},
				{"get", call("get", col1("a"), col1("i"))},
				{"element_at", call("element_at", col1("a"), col1("i"))},
				{"try", call("try_element_at", col1("a"), col1("i"))},
			} {
				want, wantErr := make([]string, n), ""
				for k := range n {
					v, code := naiveElement(arrs[k], nulls[k], idx[k], m.mode, ansi)
					if code != "" && wantErr == "" {
						wantErr = code
					}
					want[k] = show(v)
				}
				got, err := evalText(b, m.e, ansi)
				if wantErr != "" {
					if errcode.Code(err) != wantErr {
						t.Fatalf("%s ansi=%v over %v idx %v: %v, want %s", m.e, ansi, arrs, idx, err, wantErr)
					}
					continue
				}
				if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
					t.Fatalf("%s ansi=%v over %v: %v %v, want %v", m.e, ansi, arrs, got, err, want)
				}
			}
			// size, array_size, array_contains.
			var wantSize, wantASize, wantContains []string
			for k := range n {
				switch {
				case nulls[k] && ansi:
					wantSize = append(wantSize, "NULL")
				case nulls[k]:
					wantSize = append(wantSize, "-1")
				default:
					wantSize = append(wantSize, fmt.Sprint(len(arrs[k])))
				}
				if nulls[k] {
					wantASize = append(wantASize, "NULL")
				} else {
					wantASize = append(wantASize, fmt.Sprint(len(arrs[k])))
				}
				res := "false"
				if nulls[k] || vals[k] == nil {
					res = "NULL"
				} else {
					for _, e := range arrs[k] {
						if e == nil && res == "false" {
							res = "NULL"
						}
						if e != nil && *e == *vals[k] {
							res = "true"
							break
						}
					}
				}
				wantContains = append(wantContains, res)
			}
			for _, c := range []struct {
				e    Expr
				want []string
			}{
				{call("size", col1("a")), wantSize},
				{call("array_size", col1("a")), wantASize},
				{call("array_contains", col1("a"), col1("v")), wantContains},
			} {
				got, err := evalText(b, c.e, ansi)
				if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") {
					t.Fatalf("%s ansi=%v over %v (v %v): %v %v, want %v", c.e, ansi, arrs, vals, got, err, c.want)
				}
			}
			// The array column passes through unchanged.
			got, err := evalText(b, col1("a"), ansi)
			if err != nil {
				t.Fatal(err)
			}
			for k := range n {
				want := "NULL"
				if !nulls[k] {
					parts := []string{}
					for _, e := range arrs[k] {
						parts = append(parts, strings.ReplaceAll(show(e), "NULL", "null"))
					}
					want = "[" + strings.Join(parts, ", ") + "]"
				}
				if got[k] != want {
					t.Fatalf("row %d: %s, want %s", k, got[k], want)
				}
			}
		}
	}
}

func col1(n string) Col { return Col{Name: n} }
