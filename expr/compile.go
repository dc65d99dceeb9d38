package expr

import (
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Error codes of expressions: Spark's error classes.
const (
	// CodeDatatypeMismatch: an operator or function applied to types it
	// does not take (Spark's DATATYPE_MISMATCH), found when the query
	// compiles.
	CodeDatatypeMismatch = "DATATYPE_MISMATCH"
	// CodeUnresolvedRoutine: a function ethstream does not have (Spark's
	// UNRESOLVED_ROUTINE); the message lists the ones it has.
	CodeUnresolvedRoutine = "UNRESOLVED_ROUTINE"
	// CodeUnresolvedColumn: a column the input does not have.
	CodeUnresolvedColumn = "UNRESOLVED_COLUMN"
	// CodeArithmeticOverflow: an integer or decimal result out of its
	// type's range under spark.sql.ansi.enabled (a batch fails with it).
	CodeArithmeticOverflow = "ARITHMETIC_OVERFLOW"
	// CodeDivideByZero: a division or remainder by zero under ANSI.
	CodeDivideByZero = "DIVIDE_BY_ZERO"
	// CodeCastInvalidInput: a string that is not a value of the cast's
	// target type, under ANSI.
	CodeCastInvalidInput = "CAST_INVALID_INPUT"
	// CodeCastOverflow: a numeric cast whose value does not fit, under ANSI.
	CodeCastOverflow = "CAST_OVERFLOW"
	// CodeNumericOutOfRange: a decimal that needs more digits than its
	// precision, under ANSI (Spark's NUMERIC_VALUE_OUT_OF_RANGE).
	CodeNumericOutOfRange = "NUMERIC_VALUE_OUT_OF_RANGE"
	// CodeInvalidArgument: a function argument outside its domain under ANSI
	// (an unknown date_trunc unit is null instead, as in Spark).
	CodeInvalidArgument = "INVALID_PARAMETER_VALUE"
)

// Options are the SQL settings an expression is compiled under.
type Options struct {
	// NonANSI is spark.sql.ansi.enabled=false: overflow wraps (integers)
	// or is null (decimals), division by zero and failed casts are null.
	NonANSI bool
}

// Resolver gives an input column's type; false means no such column.
type Resolver func(name string) (stream.Type, bool)

// Compiled is a typed expression ready to evaluate over batches. It is
// immutable and safe for concurrent use.
type Compiled struct {
	src  Expr
	root node
	cols []string
	ansi bool
}

// Compile types e against the input columns with Spark's implicit casts
// and result types.
func Compile(e Expr, cols Resolver, o Options) (*Compiled, error) {
	c := &compiler{cols: cols, ansi: !o.NonANSI}
	root, err := c.compile(e)
	if err != nil {
		return nil, err
	}
	if as, ok := root.(*asNode); ok {
		root = as.x // the result keeps its FLOAT or BINARY type
	}
	return &Compiled{src: e, root: root, cols: Columns(e), ansi: !o.NonANSI}, nil
}

// Type is the expression's result type.
func (c *Compiled) Type() Type { return c.root.typ() }

// Columns are the input columns the expression reads.
func (c *Compiled) Columns() []string { return slices.Clone(c.cols) }

// String is the expression's canonical text.
func (c *Compiled) String() string { return c.src.String() }

// Source is the expression as parsed.
func (c *Compiled) Source() Expr { return c.src }

// Eval computes the expression for every row of b, as a column named name.
func (c *Compiled) Eval(b *stream.Batch, name string) (stream.Column, error) {
	v, err := c.root.eval(&ctx{b: b, n: b.Len, ansi: c.ansi}, nil)
	if err != nil {
		return stream.Column{}, err
	}
	return toColumn(v, name), nil
}

// EvalRows is Eval for the rows where use is true (nil: every row); the
// others are null and raise no error (a retraction row of an
// aggregation's output, whose aggregate values are not meaningful).
func (c *Compiled) EvalRows(b *stream.Batch, name string, use []bool) (stream.Column, error) {
	v, err := c.root.eval(&ctx{b: b, n: b.Len, ansi: c.ansi}, use)
	if err != nil {
		return stream.Column{}, err
	}
	// v may be a column of b's own (a bare column, a CASE arm taken
	// whole): setNull writes the skipped rows into a copy of its validity
	// (vec.borrowed), not into b's.
	for r := range use {
		if !use[r] {
			v.setNull(r)
		}
	}
	return toColumn(v, name), nil
}

// Truth evaluates a BOOLEAN expression: keep[r] is true where it is TRUE
// (not FALSE, not NULL), as a WHERE keeps rows.
func (c *Compiled) Truth(b *stream.Batch, keep []bool) ([]bool, error) {
	v, err := c.root.eval(&ctx{b: b, n: b.Len, ansi: c.ansi}, nil)
	if err != nil {
		return nil, err
	}
	keep = keep[:0]
	for r := 0; r < b.Len; r++ {
		keep = append(keep, !v.null(r) && v.i[r] != 0)
	}
	return keep, nil
}

// EvalTruth is Truth for the rows where use is true (nil: every row); the
// others are false and raise no error.
func (c *Compiled) EvalTruth(b *stream.Batch, use []bool) ([]bool, error) {
	v, err := c.root.eval(&ctx{b: b, n: b.Len, ansi: c.ansi}, use)
	if err != nil {
		return nil, err
	}
	keep := make([]bool, b.Len)
	for r := range keep {
		keep[r] = live(use, r) && !v.null(r) && v.i[r] != 0
	}
	return keep, nil
}

func toColumn(v *vec, name string) stream.Column {
	c := stream.Column{Name: name, Type: v.t.Stream(), Valid: v.valid}
	if v.t.IsArray() {
		e := toColumn(v.el, "element")
		e.Type = v.t.Kind.Elem()
		c.Offsets, c.Elems = v.off, &e
		return c
	}
	switch v.t.Kind {
	case stream.Decimal:
		// Every value fits its type's precision (the operators check it),
		// so it fits 128 bits.
		c.Decimals = make([]stream.Dec128, v.n)
		for r, x := range v.d {
			if x != nil && !v.null(r) {
				c.Decimals[r], _ = stream.Dec128FromBig(x)
			}
		}
	case stream.Float64, stream.Float32:
		c.Float64s = v.f
	case stream.String, stream.Binary:
		c.Strings = v.s
	case 0: // NULL: a nullable BIGINT with no value
		c.Int64s = make([]int64, v.n)
	default:
		c.Int64s = v.i
	}
	return c
}

type compiler struct {
	cols Resolver
	ansi bool
}

func mismatch(e Expr, format string, args ...any) error {
	return errcode.New(CodeDatatypeMismatch, "", "cast the operands to the types the operator takes (CAST(x AS DOUBLE), ...)",
		"cannot resolve %s due to data type mismatch: "+format, append([]any{e}, args...)...)
}

func (c *compiler) compile(e Expr) (node, error) {
	switch x := e.(type) {
	case Col:
		t, ok := c.cols(x.Name)
		if !ok {
			return nil, errcode.New(CodeUnresolvedColumn, "", "use a column of the input", "column %q does not exist", x.Name)
		}
		return &colNode{name: x.Name, t: Of(t)}, nil
	case Lit:
		return litNode(x)
	case Interval:
		return &constNode{t: intervalType, i: x.Micros, src: x}, nil
	case Neg:
		xn, err := c.compile(x.X)
		if err != nil {
			return nil, err
		}
		if !xn.typ().numeric() {
			return nil, mismatch(e, "the operand of unary minus is %s, not a number", xn.typ())
		}
		return &arithNode{op: "neg", l: xn, t: xn.typ(), src: e}, nil
	case Arith:
		return c.arith(x)
	case Cmp:
		l, r, err := c.pair(e, x.L, x.R)
		if err != nil {
			return nil, err
		}
		return &cmpNode{op: x.Op, l: l, r: r, src: e}, nil
	case And, Or:
		var le, re Expr
		and := true
		if a, ok := x.(And); ok {
			le, re = a.L, a.R
		} else {
			o := x.(Or)
			le, re, and = o.L, o.R, false
		}
		l, err := c.boolean(le, e)
		if err != nil {
			return nil, err
		}
		r, err := c.boolean(re, e)
		if err != nil {
			return nil, err
		}
		return &logicNode{and: and, l: l, r: r}, nil
	case Not:
		xn, err := c.boolean(x.X, e)
		if err != nil {
			return nil, err
		}
		return &notNode{x: xn}, nil
	case IsNull:
		xn, err := c.compile(x.X)
		if err != nil {
			return nil, err
		}
		return &isNullNode{x: xn, neg: x.Neg}, nil
	case In:
		return c.in(x)
	case Case:
		return c.caseExpr(x)
	case Cast:
		xn, err := c.compile(x.X)
		if err != nil {
			return nil, err
		}
		if as, ok := xn.(*asNode); ok {
			xn = as.x // a cast of a FLOAT or BINARY cast reads it as such
		}
		if !castable(xn.typ(), x.To) {
			return nil, errcode.New(CodeDatatypeMismatch, "", "cast through a type Spark allows (see docs/contracts.md, Reference query: casts)",
				"cannot resolve %s due to data type mismatch: cannot cast %s to %s", e, xn.typ(), x.To)
		}
		cn := &castNode{x: xn, to: x.To, try: x.Try, src: e}
		switch x.To {
		case Float:
			return &asNode{x: cn, t: Double}, nil
		case Binary:
			return &asNode{x: cn, t: String}, nil
		}
		return cn, nil
	case Like:
		return c.like(x)
	case Call:
		return c.call(x)
	case Index:
		return c.index(x)
	}
	return nil, errcode.New(CodeDatatypeMismatch, "", "rewrite the expression", "unsupported expression %s", e)
}

// boolean compiles a condition operand, which must be BOOLEAN (or NULL).
func (c *compiler) boolean(e, in Expr) (node, error) {
	n, err := c.compile(e)
	if err != nil {
		return nil, err
	}
	switch n.typ() {
	case Boolean:
		return n, nil
	case Null:
		return &castNode{x: n, to: Boolean, src: e}, nil
	}
	return nil, mismatch(in, "%s is %s, not BOOLEAN", e, n.typ())
}

func litNode(l Lit) (node, error) {
	switch l.Kind {
	case LitInt:
		if l.Int >= math.MinInt32 && l.Int <= math.MaxInt32 {
			return &constNode{t: Int, i: l.Int, src: l}, nil
		}
		return &constNode{t: BigInt, i: l.Int, src: l}, nil
	case LitFloat:
		return &constNode{t: Double, f: l.Flt, src: l}, nil
	case LitString:
		return &constNode{t: String, s: l.Str, src: l}, nil
	case LitBool:
		n := &constNode{t: Boolean, src: l}
		if l.Bool {
			n.i = 1
		}
		return n, nil
	case LitDecimal:
		r := l.Rat()
		s := decimalScale(r)
		unscaled := new(big.Int).Mul(r.Num(), pow10[s])
		unscaled.Quo(unscaled, r.Denom())
		p := len(new(big.Int).Abs(unscaled).String())
		return &constNode{t: Decimal(max(p, s), s), d: unscaled, src: l}, nil
	}
	return &constNode{t: Null, null: true, src: l}, nil
}

// intervalType is a day-time interval (microseconds in i); only
// timestamp arithmetic takes it.
var intervalType = Type{Kind: 0xff}

// wider is the common type of a and b for comparison, IN, CASE and
// COALESCE (Spark's findWiderTypeForTwo under ANSI), false when there is
// none.
func wider(a, b Type) (Type, bool) {
	switch {
	case a.IsArray() || b.IsArray():
		return Type{}, false // arrays do not compare, nor mix in CASE or COALESCE (array.go)
	case a == b:
		return a, true
	case a == Null:
		return b, true
	case b == Null:
		return a, true
	case a.numeric() && b.numeric():
		if a.Kind == stream.Float64 || b.Kind == stream.Float64 {
			return Double, true
		}
		if a.Kind == stream.Decimal || b.Kind == stream.Decimal {
			da, db := decimalOf(a), decimalOf(b)
			return widerDecimal(da, db), true
		}
		return BigInt, true
	case a.Kind == stream.Date && b.Kind == stream.Timestamp, a.Kind == stream.Timestamp && b.Kind == stream.Date:
		return Timestamp, true
	}
	return Type{}, false
}

// comparable is the type two operands compare in: wider, or, against a
// string, the other side's type (Spark's ANSI coercion casts the string).
func comparable(a, b Type) (Type, bool) {
	if t, ok := wider(a, b); ok {
		return t, true
	}
	switch {
	case a.IsArray() || b.IsArray():
		return Type{}, false
	case a == String && b != intervalType:
		return stringAgainst(b), true
	case b == String && a != intervalType:
		return stringAgainst(a), true
	}
	return Type{}, false
}

func stringAgainst(t Type) Type {
	if t.Kind == stream.Decimal {
		return Double
	}
	return t
}

// to casts n to t when it is not t already.
func to(n node, t Type) node {
	if n.typ() == t {
		return n
	}
	return &castNode{x: n, to: t, src: n.source(), implicit: true}
}

// pair compiles two operands of a comparison and casts them to their
// common type.
func (c *compiler) pair(e, le, re Expr) (node, node, error) {
	l, err := c.compile(le)
	if err != nil {
		return nil, nil, err
	}
	r, err := c.compile(re)
	if err != nil {
		return nil, nil, err
	}
	lt, rt := l.typ(), r.typ()
	if lt.Kind == stream.Decimal || rt.Kind == stream.Decimal {
		// An integer literal compares as its own digits (declit.go).
		if d := literalDecimal(l, rt); d != decimalOf(lt) {
			l, lt = to(l, d), d
		}
		if d := literalDecimal(r, lt); d != decimalOf(rt) {
			r, rt = to(r, d), d
		}
	}
	t, ok := comparable(lt, rt)
	if !ok || t == intervalType {
		return nil, nil, mismatch(e, "the left and right operands of the binary operator have incompatible types (%s and %s)", l.typ(), r.typ())
	}
	if t == Null {
		t = Boolean
	}
	return to(l, t), to(r, t), nil
}

func (c *compiler) in(x In) (node, error) {
	xn, err := c.compile(x.X)
	if err != nil {
		return nil, err
	}
	t := xn.typ()
	var list []node
	for _, l := range x.List {
		ln, err := litNode(l)
		if err != nil {
			return nil, err
		}
		w, ok := comparable(t, ln.typ())
		if !ok {
			return nil, mismatch(x, "the IN list has %s, the value %s", ln.typ(), xn.typ())
		}
		t = w
		list = append(list, ln)
	}
	if t == Null {
		t = Boolean
	}
	n := &inNode{x: to(xn, t), neg: x.Neg}
	for _, l := range list {
		n.list = append(n.list, to(l, t))
	}
	return n, nil
}

func (c *compiler) caseExpr(x Case) (node, error) {
	n := &caseNode{}
	var operand node
	if x.Operand != nil {
		var err error
		if operand, err = c.compile(x.Operand); err != nil {
			return nil, err
		}
	}
	var thens []node
	for _, w := range x.Whens {
		var cond node
		var err error
		if operand != nil {
			cond, err = c.compile(Cmp{Op: Eq, L: x.Operand, R: w.Cond})
		} else {
			cond, err = c.boolean(w.Cond, x)
		}
		if err != nil {
			return nil, err
		}
		then, err := c.compile(w.Then)
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		thens = append(thens, then)
	}
	if x.Else != nil {
		el, err := c.compile(x.Else)
		if err != nil {
			return nil, err
		}
		thens = append(thens, el)
		n.hasElse = true
	}
	t, err := common(x, thens)
	if err != nil {
		return nil, err
	}
	for _, th := range thens {
		n.vals = append(n.vals, to(th, t))
	}
	n.t = t
	return n, nil
}

// common is the type the branches of a CASE (or the arguments of
// coalesce, greatest, ...) are cast to.
func common(e Expr, ns []node) (Type, error) {
	t := Null
	for _, n := range ns {
		w, ok := wider(t, n.typ())
		if !ok {
			return Type{}, mismatch(e, "the branches have incompatible types (%s and %s)", t, n.typ())
		}
		t = w
	}
	return t, nil
}

func (c *compiler) like(x Like) (node, error) {
	xn, err := c.compile(x.X)
	if err != nil {
		return nil, err
	}
	pl, ok := x.Pattern.(Lit)
	if !ok || pl.Kind != LitString {
		return nil, mismatch(x, "the pattern of %s must be a string literal here", strings.ToUpper(x.Op))
	}
	if xn.typ() != String && xn.typ() != Null {
		return nil, mismatch(x, "%s applies to a STRING, not %s", strings.ToUpper(x.Op), xn.typ())
	}
	m, err := compilePattern(x.Op, pl.Str, x)
	if err != nil {
		return nil, err
	}
	return &likeNode{x: to(xn, String), m: m, neg: x.Neg}, nil
}

// arith types a binary arithmetic operator (Spark's result types).
func (c *compiler) arith(x Arith) (node, error) {
	l, err := c.compile(x.L)
	if err != nil {
		return nil, err
	}
	r, err := c.compile(x.R)
	if err != nil {
		return nil, err
	}
	lt, rt := l.typ(), r.typ()
	if lt == Null {
		lt = rt
		if lt == Null || lt == intervalType {
			lt = BigInt
		}
		l = to(l, lt)
	}
	if rt == Null {
		rt = lt
		if rt == intervalType {
			rt = BigInt
		}
		r = to(r, rt)
	}
	// Timestamp +/- a day-time interval.
	if (x.Op == "+" || x.Op == "-") && (lt.Kind == stream.Timestamp || lt.Kind == stream.Date) && rt == intervalType {
		return &arithNode{op: x.Op, l: to(l, Timestamp), r: r, t: Timestamp, src: x, interval: true}, nil
	}
	if x.Op == "+" && lt == intervalType && (rt.Kind == stream.Timestamp || rt.Kind == stream.Date) {
		return &arithNode{op: x.Op, l: to(r, Timestamp), r: l, t: Timestamp, src: x, interval: true}, nil
	}
	if !lt.numeric() || !rt.numeric() {
		return nil, mismatch(x, "the operator %s takes numbers, not %s and %s", x.Op, lt, rt)
	}
	var t Type
	switch {
	case lt.Kind == stream.Float64 || rt.Kind == stream.Float64:
		t = Double
	case lt.Kind == stream.Decimal || rt.Kind == stream.Decimal:
		dl, dr := literalDecimal(l, rt), literalDecimal(r, lt)
		p1, s1, p2, s2 := int(dl.P), int(dl.S), int(dr.P), int(dr.S)
		var res Type
		switch x.Op {
		case "+", "-":
			s := max(s1, s2)
			res = adjust(max(p1-s1, p2-s2)+s+1, s)
		case "*":
			res = adjust(p1+p2+1, s1+s2)
		case "/":
			s := max(6, s1+p2+1)
			res = adjust(p1-s1+s2+s, s)
		case "%":
			s := max(s1, s2)
			res = adjust(min(p1-s1, p2-s2)+s, s)
		case "div":
			return &arithNode{op: x.Op, l: to(l, dl), r: to(r, dr), t: BigInt, src: x, operand: dl, operandR: dr}, nil
		}
		return &arithNode{op: x.Op, l: to(l, dl), r: to(r, dr), t: res, src: x, operand: dl, operandR: dr}, nil
	case lt == Int && rt == Int:
		t = Int
	default:
		t = BigInt
	}
	switch x.Op {
	case "/":
		return &arithNode{op: x.Op, l: to(l, Double), r: to(r, Double), t: Double, src: x}, nil
	case "div":
		if t == Double {
			return nil, mismatch(x, "div takes integers or decimals, not %s and %s", lt, rt)
		}
		return &arithNode{op: x.Op, l: to(l, BigInt), r: to(r, BigInt), t: BigInt, src: x}, nil
	}
	return &arithNode{op: x.Op, l: to(l, t), r: to(r, t), t: t, src: x}, nil
}
