package filter

import (
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/stream"
)

// CodeFilterInvalid is a predicate that does not type-check against the
// input columns (an unknown column, a string column compared with a
// number, ...).
const CodeFilterInvalid = "FILTER_INVALID"

// CodeCastInvalidInput is Spark's CAST_INVALID_INPUT: under ANSI mode
// (spark.sql.ansi.enabled, the default) a string literal compared with a
// numeric column must be a number of the column's type. The predicate's
// literals are constants, so ethstream raises it when the query compiles,
// before the first batch, where Spark raises it in the first batch.
const CodeCastInvalidInput = "CAST_INVALID_INPUT"

// Options are the SQL settings a predicate is compiled under.
type Options struct {
	// NonANSI is spark.sql.ansi.enabled=false: a string literal that is not
	// a number of the column's type becomes null (the comparison is
	// unknown) instead of CAST_INVALID_INPUT.
	NonANSI bool
}

// tri is SQL's three-valued truth.
type tri uint8

const (
	fls tri = iota
	tru
	unk
)

func (t tri) not() tri {
	switch t {
	case tru:
		return fls
	case fls:
		return tru
	}
	return unk
}

// class is how two operands compare.
type class uint8

const (
	clsInt   class = iota + 1 // Int64 and Timestamp values
	clsFloat                  // Float64, or an Int64 against a decimal literal
	clsString
)

// operand is a compiled column reference or literal of a known class.
type operand struct {
	col  int // index into Predicate.cols, -1 for a literal
	null bool
	i    int64
	f    float64
	s    string
}

type node struct {
	kind   uint8 // nCmp, nAnd, nOr, nNot, nIn, nIsNull, nConst
	op     CmpOp
	cls    class
	l, r   operand
	list   []operand
	neg    bool
	kids   []*node
	constv tri
}

const (
	nCmp uint8 = iota + 1
	nAnd
	nOr
	nNot
	nIn
	nIsNull
	nConst
	// nConstNN is constv when operand l is not null, unknown when it is
	// (an integer column compared with a decimal it can never equal).
	nConstNN
)

var _ stream.Predicate = (*Predicate)(nil)

// Predicate is a compiled, type-checked Expr, the engine's read-path
// filter (stream.Predicate). It is immutable; Keep may be called from one
// goroutine at a time (it reuses a buffer).
type Predicate struct {
	expr Expr
	// ex is the predicate compiled by package expr, when it is more than
	// comparisons of columns with literals (arithmetic, functions, CASE,
	// CAST, LIKE); root is then nil.
	ex    *expr.Compiled
	opts  Options
	root  *node
	cols  []string
	types []stream.Type
	bound []*stream.Column
	keep  []bool
	// fast is root as an AND of column-constant comparisons that keepFast
	// evaluates a column at a time, nil when root is anything else.
	fast []fastCmp
}

// Types resolves a column's type; false means no such column.
type Types func(name string) (stream.Type, bool)

func invalid(format string, args ...any) error {
	return errcode.New(CodeFilterInvalid, "", "compare columns with literals of their type (numbers with numbers, strings and timestamps with quoted strings)", format, args...)
}

// Compile type-checks e against the input columns under Spark's defaults
// (ANSI mode).
func Compile(e Expr, types Types) (*Predicate, error) {
	return CompileWith(e, types, Options{})
}

// CompileWith type-checks e against the input columns under o.
func CompileWith(e Expr, types Types, o Options) (*Predicate, error) {
	p := &Predicate{expr: e, opts: o}
	if !expr.Simple(e) || !legacyTypes(e, types) {
		ex, err := expr.Compile(e, expr.Resolver(types), expr.Options{NonANSI: o.NonANSI})
		if err != nil {
			return nil, err
		}
		if t := ex.Type(); t != expr.Boolean && t != expr.Null {
			return nil, invalid("WHERE %s is %s, not a condition; compare it with a value", e, t)
		}
		p.ex, p.cols = ex, ex.Columns()
		return p, nil
	}
	root, err := p.compile(e, types)
	if err != nil {
		return nil, err
	}
	p.root = root
	p.fast, _ = p.compileFast(root)
	p.bound = make([]*stream.Column, len(p.cols))
	return p, nil
}

// legacyTypes reports whether every column e reads is of a type the
// simple evaluator's classes hold (BIGINT, TIMESTAMP, DOUBLE, STRING);
// any other (BOOLEAN, INT, DECIMAL, DATE, ...) goes to package expr.
func legacyTypes(e Expr, types Types) bool {
	for _, c := range expr.Columns(e) {
		switch t, _ := types(c); t {
		case stream.Int64, stream.Timestamp, stream.Float64, stream.String, 0:
		default:
			return false
		}
	}
	return true
}

// String is the canonical text of the predicate.
func (p *Predicate) String() string { return p.expr.String() }

// Expr is the expression the predicate was compiled from.
func (p *Predicate) Expr() Expr { return p.expr }

// Columns are the input columns the predicate reads.
func (p *Predicate) Columns() []string { return append([]string(nil), p.cols...) }

func (p *Predicate) colIndex(name string, t stream.Type) int {
	for i, c := range p.cols {
		if c == name {
			return i
		}
	}
	p.cols = append(p.cols, name)
	p.types = append(p.types, t)
	return len(p.cols) - 1
}

func classOf(t stream.Type) class {
	switch t {
	case stream.Int64, stream.Timestamp:
		return clsInt
	case stream.Float64:
		return clsFloat
	}
	return clsString
}

// typedSide is an operand before its class is settled.
type typedSide struct {
	col  string
	t    stream.Type // 0 for a literal
	lit  Lit
	isCo bool
}

func side(e Expr, types Types) (typedSide, error) {
	switch x := e.(type) {
	case Col:
		t, ok := types(x.Name)
		if !ok {
			return typedSide{}, errcode.New(CodeFilterInvalid, "", "use a column of the input", "WHERE references unknown column %q", x.Name)
		}
		return typedSide{col: x.Name, t: t, isCo: true}, nil
	case Lit:
		return typedSide{lit: x}, nil
	}
	return typedSide{}, invalid("WHERE compares %s, which is not a column or a literal", e)
}

// litOperand converts literal l to class c (the column's), for column type
// t, with Spark's ANSI implicit casts: a string literal becomes a number of
// the column's type (BIGINT or DOUBLE) or a timestamp; an integer or a
// decimal becomes a double against a double column. Exact comparisons of
// an integer column with a decimal are rewritten before (intDecimal).
func (p *Predicate) litOperand(l Lit, c class, t stream.Type, against string) (operand, error) {
	o := operand{col: -1}
	if l.Kind == LitNull {
		o.null = true
		return o, nil
	}
	switch c {
	case clsInt:
		if t == stream.Timestamp {
			if l.Kind != LitString {
				return o, invalid("timestamp column %q compared with %s: quote a timestamp, e.g. '2024-01-01 00:00:00'", against, l)
			}
			us, ok := expr.ParseTimestamp(l.Str)
			if !ok {
				return o, invalid("%s is not a timestamp (want 'YYYY-MM-DD[ HH:MM:SS]' or RFC 3339) for column %q", l, against)
			}
			o.i = us
			return o, nil
		}
		switch l.Kind {
		case LitInt:
			o.i = l.Int
		case LitString:
			v, err := strconv.ParseInt(strings.TrimSpace(l.Str), 10, 64)
			if err != nil {
				return p.castFailed(o, l, "BIGINT", against)
			}
			o.i = v
		default:
			return o, invalid("%s column %q compared with %s", typeName(t), against, l)
		}
	case clsFloat:
		switch l.Kind {
		case LitInt:
			o.f = float64(l.Int)
		case LitFloat:
			o.f = l.Flt
		case LitDecimal:
			o.f, _ = l.Rat().Float64()
		case LitString:
			v, err := strconv.ParseFloat(strings.TrimSpace(l.Str), 64)
			if err != nil {
				return p.castFailed(o, l, "DOUBLE", against)
			}
			o.f = v
		default:
			return o, invalid("%s column %q compared with %s", typeName(t), against, l)
		}
	case clsString:
		if l.Kind != LitString {
			return o, invalid("string column %q compared with %s: quote the value", against, l)
		}
		o.s = l.Str
	}
	return o, nil
}

// castFailed is a string literal that is not a number of the column's
// type: CAST_INVALID_INPUT under ANSI, a null otherwise (Spark's cast).
func (p *Predicate) castFailed(o operand, l Lit, to, against string) (operand, error) {
	if p.opts.NonANSI {
		o.null = true
		return o, nil
	}
	return o, errcode.New(CodeCastInvalidInput, "", "compare "+against+" with a number (or set spark.sql.ansi.enabled=false to make it null)",
		"the value %s of the type \"STRING\" cannot be cast to \"%s\" because it is malformed (compared with column %q)", l, to, against)
}

// intDecimal compiles an integer column compared with a DECIMAL literal
// exactly, as Spark does (both widen to DECIMAL(20+s, s)): into a
// comparison with an integer bound, or a constant for non-null values
// when the decimal lies outside BIGINT or cannot be equal. flip: the
// literal is on the left.
func (p *Predicate) intDecimal(op CmpOp, col operand, d *big.Rat, flip bool) *node {
	if flip {
		op = map[CmpOp]CmpOp{Eq: Eq, Ne: Ne, Lt: Gt, Le: Ge, Gt: Lt, Ge: Le}[op]
	}
	konst := func(v bool) *node {
		n := &node{kind: nConstNN, l: col, constv: fls}
		if v {
			n.constv = tru
		}
		return n
	}
	cmpInt := func(op CmpOp, v int64) *node {
		return &node{kind: nCmp, op: op, cls: clsInt, l: col, r: operand{col: -1, i: v}}
	}
	floor := new(big.Int).Div(d.Num(), d.Denom()) // Euclidean: floor for a positive denominator
	integral := d.IsInt()
	ceil := new(big.Int).Set(floor)
	if !integral {
		ceil.Add(ceil, big.NewInt(1))
	}
	minI, maxI := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	switch op {
	case Eq, Ne:
		if !integral || floor.Cmp(minI) < 0 || floor.Cmp(maxI) > 0 {
			return konst(op == Ne)
		}
		return cmpInt(op, floor.Int64())
	case Lt, Ge: // x < d  <=>  x < ceil(d)
		if ceil.Cmp(maxI) > 0 {
			return konst(op == Lt)
		}
		if ceil.Cmp(minI) <= 0 {
			return konst(op == Ge)
		}
		return cmpInt(op, ceil.Int64())
	default: // Le, Gt: x <= d  <=>  x <= floor(d)
		if floor.Cmp(maxI) >= 0 {
			return konst(op == Le)
		}
		if floor.Cmp(minI) < 0 {
			return konst(op == Gt)
		}
		return cmpInt(op, floor.Int64())
	}
}

func (p *Predicate) compile(e Expr, types Types) (*node, error) {
	switch x := e.(type) {
	case And, Or:
		var l, r Expr
		k := nAnd
		if a, ok := x.(And); ok {
			l, r = a.L, a.R
		} else {
			o := x.(Or)
			l, r, k = o.L, o.R, nOr
		}
		ln, err := p.compile(l, types)
		if err != nil {
			return nil, err
		}
		rn, err := p.compile(r, types)
		if err != nil {
			return nil, err
		}
		return &node{kind: k, kids: []*node{ln, rn}}, nil
	case Not:
		n, err := p.compile(x.X, types)
		if err != nil {
			return nil, err
		}
		return &node{kind: nNot, kids: []*node{n}}, nil
	case Lit:
		switch x.Kind {
		case LitBool:
			if x.Bool {
				return &node{kind: nConst, constv: tru}, nil
			}
			return &node{kind: nConst, constv: fls}, nil
		case LitNull:
			return &node{kind: nConst, constv: unk}, nil
		}
		return nil, invalid("WHERE %s is not a condition", x)
	case Col:
		t, ok := types(x.Name)
		if !ok {
			return nil, errcode.New(CodeFilterInvalid, "", "use a column of the input", "WHERE references unknown column %q", x.Name)
		}
		return nil, invalid("WHERE %s: column %q is %s, not a condition; compare it with a value", x, x.Name, typeName(t))
	case IsNull:
		s, err := side(x.X, types)
		if err != nil {
			return nil, err
		}
		if !s.isCo {
			return nil, invalid("IS NULL applies to a column, not %s", x.X)
		}
		return &node{kind: nIsNull, neg: x.Neg, l: operand{col: p.colIndex(s.col, s.t)}}, nil
	case In:
		return p.compileIn(x, types)
	case Cmp:
		return p.compileCmp(x, types)
	}
	return nil, invalid("unsupported condition %s", e)
}

// compileIn compiles X [NOT] IN (list): the list is converted to the
// column's class (a DOUBLE list element makes a BIGINT column compare as
// DOUBLE; DECIMAL elements compare exactly).
func (p *Predicate) compileIn(x In, types Types) (*node, error) {
	s, err := side(x.X, types)
	if err != nil {
		return nil, err
	}
	if !s.isCo {
		return nil, invalid("IN applies to a column, not %s", x.X)
	}
	n := &node{kind: nIn, neg: x.Neg, cls: classOf(s.t), l: operand{col: p.colIndex(s.col, s.t)}}
	if s.t == stream.Int64 && slices.ContainsFunc(x.List, func(l Lit) bool { return l.Kind == LitFloat }) {
		n.cls = clsFloat // the list's common type is DOUBLE
	}
	for _, l := range x.List {
		if l.Kind == LitDecimal && n.cls == clsInt && s.t == stream.Int64 {
			// Exact: an element equal to no BIGINT never matches.
			if r := l.Rat(); r.IsInt() && r.Num().IsInt64() {
				n.list = append(n.list, operand{col: -1, i: r.Num().Int64()})
			}
			continue
		}
		o, err := p.litOperand(l, n.cls, s.t, s.col)
		if err != nil {
			return nil, err
		}
		n.list = append(n.list, o)
	}
	return n, nil
}

// compileCmp compiles a comparison of two columns or of a column with a
// literal, with Spark's implicit casts.
func (p *Predicate) compileCmp(x Cmp, types Types) (*node, error) {
	ls, err := side(x.L, types)
	if err != nil {
		return nil, err
	}
	rs, err := side(x.R, types)
	if err != nil {
		return nil, err
	}
	n := &node{kind: nCmp, op: x.Op}
	switch {
	case ls.isCo && rs.isCo:
		lc, rc := classOf(ls.t), classOf(rs.t)
		if lc != rc && !(lc != clsString && rc != clsString) {
			return nil, invalid("WHERE %s compares %s column %q with %s column %q", x, typeName(ls.t), ls.col, typeName(rs.t), rs.col)
		}
		if (ls.t == stream.Timestamp) != (rs.t == stream.Timestamp) && lc == clsInt && rc == clsInt {
			return nil, invalid("WHERE %s compares a timestamp with a number", x)
		}
		n.cls = lc
		if lc != rc {
			n.cls = clsFloat
		}
		n.l = operand{col: p.colIndex(ls.col, ls.t)}
		n.r = operand{col: p.colIndex(rs.col, rs.t)}
	case ls.isCo || rs.isCo:
		colSide, litSide, flip := ls, rs, false
		if !ls.isCo {
			colSide, litSide, flip = rs, ls, true
		}
		n.cls = classOf(colSide.t)
		if n.cls == clsInt && colSide.t == stream.Int64 && litSide.lit.Kind == LitFloat {
			n.cls = clsFloat
		}
		if n.cls == clsInt && colSide.t == stream.Int64 && litSide.lit.Kind == LitDecimal {
			co := operand{col: p.colIndex(colSide.col, colSide.t)}
			return p.intDecimal(x.Op, co, litSide.lit.Rat(), flip), nil
		}
		lo, err := p.litOperand(litSide.lit, n.cls, colSide.t, colSide.col)
		if err != nil {
			return nil, err
		}
		co := operand{col: p.colIndex(colSide.col, colSide.t)}
		n.l, n.r = co, lo
		if flip {
			n.l, n.r = lo, co
		}
	default:
		return nil, invalid("WHERE %s compares two literals; compare a column", x)
	}
	return n, nil
}

// Keep returns, for each row of b, whether the predicate is TRUE for it.
// The slice is reused by the next call.
func (p *Predicate) Keep(b *stream.Batch) ([]bool, error) {
	if p.ex != nil {
		keep, err := p.ex.Truth(b, p.keep)
		p.keep = keep
		return keep, err
	}
	for i, name := range p.cols {
		c := b.Column(name)
		if c == nil {
			return nil, errcode.New(CodeFilterInvalid, "", "this is a bug in the query's projection", "filter column %q is not in the input", name)
		}
		if c.Type != p.types[i] {
			return nil, errcode.New(CodeFilterInvalid, "", "this is a bug in the source", "filter column %q is %s, want %s", name, c.Type, p.types[i])
		}
		p.bound[i] = c
	}
	if cap(p.keep) < b.Len {
		p.keep = make([]bool, b.Len)
	}
	p.keep = p.keep[:b.Len]
	if p.fast != nil {
		p.keepFast(p.fast, p.keep)
	} else {
		for r := 0; r < b.Len; r++ {
			p.keep[r] = p.eval(p.root, r) == tru
		}
	}
	clear(p.bound)
	return p.keep, nil
}

// value reads operand o at row r in class c.
func (p *Predicate) value(o operand, c class, r int) (operand, bool) {
	if o.col < 0 {
		return o, !o.null
	}
	col := p.bound[o.col]
	if col.IsNull(r) {
		return o, false
	}
	var v operand
	switch col.Type {
	case stream.Int64, stream.Timestamp:
		v.i = col.Int64s[r]
		if c == clsFloat {
			v.f = float64(v.i)
		}
	case stream.Float64:
		v.f = col.Float64s[r]
	default:
		v.s = col.Strings[r]
	}
	return v, true
}

func compare(c class, a, b operand) int {
	switch c {
	case clsInt:
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
	case clsFloat:
		return expr.CompareDouble(a.f, b.f)
	default:
		switch {
		case a.s < b.s:
			return -1
		case a.s > b.s:
			return 1
		}
	}
	return 0
}

func (p *Predicate) eval(n *node, r int) tri {
	switch n.kind {
	case nConst:
		return n.constv
	case nConstNN:
		if p.bound[n.l.col].IsNull(r) {
			return unk
		}
		return n.constv
	case nAnd:
		a := p.eval(n.kids[0], r)
		if a == fls {
			return fls
		}
		b := p.eval(n.kids[1], r)
		switch {
		case b == fls:
			return fls
		case a == tru && b == tru:
			return tru
		}
		return unk
	case nOr:
		a := p.eval(n.kids[0], r)
		if a == tru {
			return tru
		}
		b := p.eval(n.kids[1], r)
		switch {
		case b == tru:
			return tru
		case a == fls && b == fls:
			return fls
		}
		return unk
	case nNot:
		return p.eval(n.kids[0], r).not()
	case nIsNull:
		null := p.bound[n.l.col].IsNull(r)
		if null != n.neg {
			return tru
		}
		return fls
	case nIn:
		return p.evalIn(n, r)
	case nCmp:
		return p.evalCmp(n, r)
	}
	return unk
}

// evalIn is X [NOT] IN (list) at row r, in three-valued logic.
func (p *Predicate) evalIn(n *node, r int) tri {
	v, ok := p.value(n.l, n.cls, r)
	if !ok {
		return unk
	}
	res := fls
	for _, o := range n.list {
		if o.null {
			res = unk
			continue
		}
		if compare(n.cls, v, o) == 0 {
			res = tru
			break
		}
	}
	if n.neg {
		return res.not()
	}
	return res
}

// evalCmp is a comparison at row r: unknown when a side is null.
func (p *Predicate) evalCmp(n *node, r int) tri {
	a, ok1 := p.value(n.l, n.cls, r)
	b, ok2 := p.value(n.r, n.cls, r)
	if !ok1 || !ok2 {
		return unk
	}
	if holds(n.op, compare(n.cls, a, b)) {
		return tru
	}
	return fls
}
