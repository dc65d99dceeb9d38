package expr

import (
	"math"
	"math/big"
	"slices"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// ctx is one evaluation: the batch and the ANSI setting.
type ctx struct {
	b    *stream.Batch
	n    int
	ansi bool
}

// node is a typed expression. eval computes it for every row; sel, when
// not nil, marks the rows whose value is used: an error (overflow, a
// division by zero, a bad cast) is raised only for those, as Spark
// evaluates the branch of a CASE, IF, COALESCE, AND or OR a row takes.
type node interface {
	typ() Type
	eval(c *ctx, sel []bool) (*vec, error)
	source() Expr
}

type colNode struct {
	name string
	t    Type
}

func (n *colNode) typ() Type    { return n.t }
func (n *colNode) source() Expr { return Col{Name: n.name} }
func (n *colNode) eval(c *ctx, _ []bool) (*vec, error) {
	col := c.b.Column(n.name)
	if col == nil {
		return nil, errcode.New(CodeUnresolvedColumn, "", "this is a bug in the query's projection", "expression column %q is not in the input", n.name)
	}
	if Of(col.Type) != n.t {
		return nil, errcode.New(CodeDatatypeMismatch, "", "this is a bug in the source", "expression column %q is %s, want %s", n.name, col.Type, n.t)
	}
	return fromColumn(col, c.n), nil
}

// constNode is a literal, broadcast to every row.
type constNode struct {
	t    Type
	null bool
	i    int64
	f    float64
	s    string
	d    *big.Int
	src  Expr
}

func (n *constNode) typ() Type    { return n.t }
func (n *constNode) source() Expr { return n.src }
func (n *constNode) eval(c *ctx, _ []bool) (*vec, error) {
	v := newVec(n.t, c.n)
	for r := 0; r < c.n; r++ {
		switch {
		case n.null:
			v.setNull(r)
		case v.i != nil:
			v.i[r] = n.i
		case v.f != nil:
			v.f[r] = n.f
		case v.s != nil:
			v.s[r] = n.s
		case v.d != nil:
			v.d[r] = n.d
		}
	}
	return v, nil
}

func overflow(e Expr, what string) error {
	return errcode.New(CodeArithmeticOverflow, "", "use try_add, try_subtract, try_multiply or a wider type (CAST(x AS DECIMAL(38,0)) or DOUBLE), or set spark.sql.ansi.enabled=false to wrap",
		"%s overflow in %s", what, e)
}

func divideByZero(e Expr) error {
	return errcode.New(CodeDivideByZero, "", "use try_divide to tolerate a divisor of 0 and return NULL instead, or set spark.sql.ansi.enabled=false",
		"division by zero in %s", e)
}

func outOfRange(e Expr, v *big.Int, t Type) error {
	return errcode.New(CodeNumericOutOfRange, "", "use a wider DECIMAL or DOUBLE, or set spark.sql.ansi.enabled=false to make it NULL",
		"%s cannot be represented as %s in %s", decimalText(v, t.S), t, e)
}

type arithNode struct {
	op                string // + - * / % div, or neg (unary, l only)
	l, r              node
	t                 Type
	operand, operandR Type // the decimal operand types, for decimal arithmetic
	interval          bool // timestamp +/- day-time interval
	try               bool // try_add and friends: an error is a null in any mode
	src               Expr
}

func (n *arithNode) typ() Type    { return n.t }
func (n *arithNode) source() Expr { return n.src }

func (n *arithNode) eval(c *ctx, sel []bool) (*vec, error) {
	var l, r *vec
	if !rowLoopsOnly && n.batchable() {
		// A batch loop (arith_fast.go), or its operands for the row loop.
		out, lv, rv, err := n.evalBatch(c, sel)
		if out != nil || err != nil {
			return out, err
		}
		l, r = lv, rv
	} else {
		var err error
		if l, err = n.l.eval(c, sel); err != nil {
			return nil, err
		}
		if n.r != nil {
			if r, err = n.r.eval(c, sel); err != nil {
				return nil, err
			}
		}
	}
	return n.rows(c, sel, l, r)
}

// rows is eval's row loop over the operands' values l and r (nil for a
// negation).
func (n *arithNode) rows(c *ctx, sel []bool, l, r *vec) (*vec, error) {
	out := newVec(n.t, c.n)
	out.nullsFrom(l)
	if r != nil {
		out.nullsFrom(r)
	}
	// fail reports an error for a live row under ANSI; otherwise the row
	// is null (or wraps, which the caller handles before calling).
	fail := func(row int, err error) error {
		if c.ansi && !n.try && live(sel, row) {
			return err
		}
		out.setNull(row)
		return nil
	}
	// wrap is an integer overflow: Spark 3's legacy arithmetic keeps the
	// two's-complement result (already in out), try_ makes it null.
	wrap := func(row int, err error) error {
		if !c.ansi && !n.try {
			return nil
		}
		return fail(row, err)
	}
	for row := 0; row < c.n; row++ {
		if out.null(row) {
			continue
		}
		var err error
		switch {
		case n.interval:
			a, b := l.i[row], r.i[row]
			if n.op == "-" {
				b = -b
			}
			s := a + b
			if (s > a) != (b > 0) {
				if live(sel, row) {
					return nil, overflow(n.src, "timestamp")
				}
				out.setNull(row)
				continue
			}
			out.i[row] = s
		case n.op == "neg":
			err = n.neg(l, out, row, wrap)
		case n.t.Kind == stream.Float64:
			err = n.double(l.f[row], r.f[row], out, row, fail)
		case n.operand.Kind == stream.Decimal:
			err = n.decimal(l.d[row], r.d[row], out, row, fail)
		default:
			err = n.integral(l.i[row], r.i[row], out, row, fail, wrap)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (n *arithNode) neg(l, out *vec, row int, wrap func(int, error) error) error {
	switch n.t.Kind {
	case stream.Float64:
		out.f[row] = -l.f[row]
	case stream.Decimal:
		out.d[row] = new(big.Int).Neg(l.d[row])
	case stream.Int32:
		v := -l.i[row]
		if v > math.MaxInt32 {
			out.i[row] = math.MinInt32
			return wrap(row, overflow(n.src, "integer"))
		}
		out.i[row] = v
	default:
		if l.i[row] == math.MinInt64 {
			out.i[row] = math.MinInt64
			return wrap(row, overflow(n.src, "long"))
		}
		out.i[row] = -l.i[row]
	}
	return nil
}

func (n *arithNode) double(a, b float64, out *vec, row int, fail func(int, error) error) error {
	switch n.op {
	case "+":
		out.f[row] = a + b
	case "-":
		out.f[row] = a - b
	case "*":
		out.f[row] = a * b
	case "/":
		if b == 0 {
			return fail(row, divideByZero(n.src))
		}
		out.f[row] = a / b
	case "%":
		if b == 0 {
			return fail(row, divideByZero(n.src))
		}
		out.f[row] = math.Mod(a, b)
	}
	return nil
}

// integral is INT or BIGINT arithmetic: Java's two's complement, checked
// under ANSI (Math.addExact and friends), wrapping otherwise.
func (n *arithNode) integral(a, b int64, out *vec, row int, fail, wrap func(int, error) error) error {
	var v int64
	ovf := false
	switch n.op {
	case "+":
		v = a + b
		ovf = (v > a) != (b > 0)
	case "-":
		v = a - b
		ovf = (v < a) != (b > 0)
	case "*":
		v = a * b
		ovf = a != 0 && (v/a != b || a == -1 && b == math.MinInt64)
	case "%":
		if b == 0 {
			return fail(row, divideByZero(n.src))
		}
		v = a % b
	case "div":
		if b == 0 {
			return fail(row, divideByZero(n.src))
		}
		v = a / b
		ovf = a == math.MinInt64 && b == -1
	}
	if n.t.Kind == stream.Int32 && !ovf {
		ovf = v < math.MinInt32 || v > math.MaxInt32
		if ovf {
			v = int64(int32(v))
		}
	}
	out.i[row] = v
	if ovf {
		what := "long"
		if n.t.Kind == stream.Int32 {
			what = "integer"
		}
		return wrap(row, overflow(n.src, what))
	}
	return nil
}

// decimal is DECIMAL arithmetic: the exact result rounded HALF_UP to the
// result's scale, out of its precision an error under ANSI, null
// otherwise.
func (n *arithNode) decimal(a, b *big.Int, out *vec, row int, fail func(int, error) error) error {
	s1, s2 := n.operand.S, n.operandR.S
	var v *big.Int
	var scale uint8
	switch n.op {
	case "+", "-":
		scale = max(s1, s2)
		x, y := rescale(a, s1, scale), rescale(b, s2, scale)
		if n.op == "+" {
			v = x.Add(x, y)
		} else {
			v = x.Sub(x, y)
		}
	case "*":
		v, scale = new(big.Int).Mul(a, b), s1+s2
	case "/", "%", "div":
		if b.Sign() == 0 {
			return fail(row, divideByZero(n.src))
		}
		switch n.op {
		case "/":
			// BigDecimal.divide(that, 38, HALF_UP), then to the result's scale.
			num := new(big.Int).Mul(a, pow10[MaxPrecision-int(s1)+int(s2)])
			v, scale = divHalfUp(num, b), MaxPrecision
		case "%":
			scale = max(s1, s2)
			x, y := rescale(a, s1, scale), rescale(b, s2, scale)
			v = x.Rem(x, y)
		default: // div: the integral quotient, truncated, as a BIGINT
			scale = max(s1, s2)
			x, y := rescale(a, s1, scale), rescale(b, s2, scale)
			q := x.Quo(x, y)
			if !q.IsInt64() {
				return fail(row, overflow(n.src, "long"))
			}
			out.i[row] = q.Int64()
			return nil
		}
	}
	v = rescale(v, scale, n.t.S)
	if !fits(v, n.t.P) {
		return fail(row, outOfRange(n.src, v, n.t))
	}
	out.d[row] = v
	return nil
}

type cmpNode struct {
	op   CmpOp
	l, r node
	src  Expr
}

func (n *cmpNode) typ() Type    { return Boolean }
func (n *cmpNode) source() Expr { return n.src }
func (n *cmpNode) eval(c *ctx, sel []bool) (*vec, error) {
	l, err := n.l.eval(c, sel)
	if err != nil {
		return nil, err
	}
	r, err := n.r.eval(c, sel)
	if err != nil {
		return nil, err
	}
	out := newVec(Boolean, c.n)
	out.nullsFrom(l, r)
	for row := 0; row < c.n; row++ {
		if out.null(row) {
			continue
		}
		k := compareAt(l, r, row)
		var t bool
		switch n.op {
		case Eq:
			t = k == 0
		case Ne:
			t = k != 0
		case Lt:
			t = k < 0
		case Le:
			t = k <= 0
		case Gt:
			t = k > 0
		case Ge:
			t = k >= 0
		}
		if t {
			out.i[row] = 1
		}
	}
	return out, nil
}

// compareAt compares two non-null values of the same type at row r:
// doubles as Spark orders them (NaN equal to itself and above every other
// value, -0.0 equal to 0.0), strings by their UTF-8 bytes.
func compareAt(a, b *vec, r int) int {
	switch a.t.Kind {
	case stream.Float64:
		return CompareDouble(a.f[r], b.f[r])
	case stream.String:
		switch {
		case a.s[r] < b.s[r]:
			return -1
		case a.s[r] > b.s[r]:
			return 1
		}
		return 0
	case stream.Decimal:
		return a.d[r].Cmp(b.d[r])
	}
	switch {
	case a.i[r] < b.i[r]:
		return -1
	case a.i[r] > b.i[r]:
		return 1
	}
	return 0
}

// CompareDouble orders doubles as Spark does (SQLOrderingUtil.compareDoubles):
// NaN equal to itself and above every other value, -0.0 equal to 0.0 (Go's
// operators alone make NaN equal to every value). Package filter's WHERE
// uses it too.
func CompareDouble(x, y float64) int {
	xn, yn := math.IsNaN(x), math.IsNaN(y)
	switch {
	case xn && yn:
		return 0
	case xn:
		return 1
	case yn:
		return -1
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// logicNode is AND or OR in three-valued logic; the right side is
// evaluated only for the rows the left does not decide, as Spark's
// short-circuit does.
type logicNode struct {
	and  bool
	l, r node
}

func (n *logicNode) typ() Type    { return Boolean }
func (n *logicNode) source() Expr { return nil }
func (n *logicNode) eval(c *ctx, sel []bool) (*vec, error) {
	l, err := n.l.eval(c, sel)
	if err != nil {
		return nil, err
	}
	decided := int64(0) // AND: false decides
	if !n.and {
		decided = 1
	}
	rsel := narrow(sel, c.n, func(row int) bool { return l.null(row) || l.i[row] != decided })
	r, err := n.r.eval(c, rsel)
	if err != nil {
		return nil, err
	}
	out := newVec(Boolean, c.n)
	for row := 0; row < c.n; row++ {
		ln, rn := l.null(row), r.null(row)
		switch {
		case !ln && l.i[row] == decided, !rn && r.i[row] == decided:
			out.i[row] = decided
		case ln || rn:
			out.setNull(row)
		default:
			out.i[row] = 1 - decided
		}
	}
	return out, nil
}

type notNode struct{ x node }

func (n *notNode) typ() Type    { return Boolean }
func (n *notNode) source() Expr { return nil }
func (n *notNode) eval(c *ctx, sel []bool) (*vec, error) {
	x, err := n.x.eval(c, sel)
	if err != nil {
		return nil, err
	}
	out := newVec(Boolean, c.n)
	out.nullsFrom(x)
	for row := range out.i {
		out.i[row] = 1 - x.i[row]
	}
	return out, nil
}

type isNullNode struct {
	x   node
	neg bool
}

func (n *isNullNode) typ() Type    { return Boolean }
func (n *isNullNode) source() Expr { return nil }
func (n *isNullNode) eval(c *ctx, sel []bool) (*vec, error) {
	x, err := n.x.eval(c, sel)
	if err != nil {
		return nil, err
	}
	return n.of(x, c.n), nil
}

// of is the test's value over n rows given x's.
func (n *isNullNode) of(x *vec, rows int) *vec {
	out := newVec(Boolean, rows)
	for row := range out.i {
		if x.null(row) != n.neg {
			out.i[row] = 1
		}
	}
	return out
}

// inNode is X [NOT] IN (list): true on a match, else null when X or an
// element is null, else false.
type inNode struct {
	x    node
	list []node
	neg  bool
}

func (n *inNode) typ() Type    { return Boolean }
func (n *inNode) source() Expr { return nil }
func (n *inNode) eval(c *ctx, sel []bool) (*vec, error) {
	x, err := n.x.eval(c, sel)
	if err != nil {
		return nil, err
	}
	vals := make([]*vec, len(n.list))
	for i, l := range n.list {
		if vals[i], err = l.eval(c, sel); err != nil {
			return nil, err
		}
	}
	out := newVec(Boolean, c.n)
	for row := 0; row < c.n; row++ {
		if x.null(row) {
			out.setNull(row)
			continue
		}
		found, unknown := false, false
		for _, v := range vals {
			if v.null(row) {
				unknown = true
				continue
			}
			if compareAt(x, v, row) == 0 {
				found = true
				break
			}
		}
		switch {
		case found:
			out.i[row] = 1
		case unknown:
			out.setNull(row)
		}
		if n.neg && !out.null(row) {
			out.i[row] = 1 - out.i[row]
		}
	}
	return out, nil
}

// caseNode is a searched CASE (a simple CASE is compiled into one); IF is
// a CASE with one arm. Each branch is evaluated for the rows that take it.
type caseNode struct {
	conds   []node
	vals    []node // one per cond, then the ELSE when hasElse
	hasElse bool
	t       Type
}

func (n *caseNode) typ() Type    { return n.t }
func (n *caseNode) source() Expr { return nil }
func (n *caseNode) eval(c *ctx, sel []bool) (*vec, error) {
	// The first arm's condition over every row (open, below, would select
	// them all): when it is TRUE for each, the CASE is that arm's value,
	// evaluated over every row as its own selection would (a windowed
	// query's CASE WHEN time IS NOT NULL THEN x END over rows that all
	// have a time), not copied row by row.
	var first *vec
	if sel == nil && !rowLoopsOnly {
		var err error
		if first, err = n.firstCond(c); err != nil {
			return nil, err
		}
		if first == nil {
			return n.vals[0].eval(c, nil)
		}
	}
	out := newVec(n.t, c.n)
	open := make([]bool, c.n) // rows no arm has taken yet
	for r := range open {
		open[r] = live(sel, r)
	}
	taken := make([]int, c.n)
	for r := range taken {
		taken[r] = -1
	}
	for k, cond := range n.conds {
		cv := first
		if k > 0 || cv == nil {
			var err error
			if cv, err = cond.eval(c, open); err != nil {
				return nil, err
			}
		}
		for r := range open {
			if open[r] && !cv.null(r) && cv.i[r] != 0 {
				taken[r], open[r] = k, false
			}
		}
	}
	if n.hasElse {
		for r := range open {
			if open[r] {
				taken[r] = len(n.conds)
			}
		}
	}
	for k, val := range n.vals {
		vsel := make([]bool, c.n)
		for r := range vsel {
			vsel[r] = taken[r] == k
		}
		v, err := val.eval(c, vsel)
		if err != nil {
			return nil, err
		}
		for r := range vsel {
			if vsel[r] {
				copyValue(out, r, v, r)
			}
		}
	}
	for r := range taken {
		if taken[r] < 0 {
			out.setNull(r)
		}
	}
	return out, nil
}

// firstCond is the first arm's condition over every row, nil when it is
// TRUE at each; an x IS NOT NULL over an x without nulls is told by x's
// nulls, with no vector of TRUEs made.
func (n *caseNode) firstCond(c *ctx) (*vec, error) {
	if in, ok := n.conds[0].(*isNullNode); ok && in.neg {
		x, err := in.x.eval(c, nil)
		if err != nil {
			return nil, err
		}
		if x.valid == nil || !slices.Contains(x.valid, false) {
			return nil, nil
		}
		return in.of(x, c.n), nil
	}
	v, err := n.conds[0].eval(c, nil)
	if err != nil {
		return nil, err
	}
	if (v.valid == nil || !slices.Contains(v.valid, false)) && !slices.Contains(v.i, 0) {
		return nil, nil
	}
	return v, nil
}

// copyValue sets dst[dr] to src[sr] (same type), null included.
func copyValue(dst *vec, dr int, src *vec, sr int) {
	if src.null(sr) {
		dst.setNull(dr)
		return
	}
	switch {
	case dst.i != nil:
		dst.i[dr] = src.i[sr]
	case dst.f != nil:
		dst.f[dr] = src.f[sr]
	case dst.s != nil:
		dst.s[dr] = src.s[sr]
	case dst.d != nil:
		dst.d[dr] = src.d[sr]
	default:
		dst.setNull(dr)
	}
}

type likeNode struct {
	x   node
	m   func(string) bool
	neg bool
}

func (n *likeNode) typ() Type    { return Boolean }
func (n *likeNode) source() Expr { return nil }
func (n *likeNode) eval(c *ctx, sel []bool) (*vec, error) {
	x, err := n.x.eval(c, sel)
	if err != nil {
		return nil, err
	}
	out := newVec(Boolean, c.n)
	out.nullsFrom(x)
	for r := 0; r < c.n; r++ {
		if !out.null(r) && n.m(x.s[r]) != n.neg {
			out.i[r] = 1
		}
	}
	return out, nil
}
