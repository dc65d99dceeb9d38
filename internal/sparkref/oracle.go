package sparkref

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Result is the table a query leaves after its last batch, or the batch
// that fails it.
type Result struct {
	// Columns are the output columns: window_start and window_end (windowed
	// queries), the keys in GROUP BY order, the aggregates in SELECT order.
	Columns []string
	// Rows are keyed by KeyText of their key columns, sorted by key.
	Rows []OutRow
	// Fail is the batch that fails the query (nil: none).
	Fail *Failure
	// Late counts the window instances dropped behind the watermark, and
	// Pushed the rows the conjuncts below the watermark withheld from it
	// while a conjunct above it... (how much of the late-data rules a run
	// exercised).
	Late, Withheld int
	// Duplicates counts the rows the query's deduplication dropped as
	// duplicates (not late); DedupLate the rows it dropped as late, and
	// Readmitted the rows it passed whose key an earlier batch's watermark
	// had evicted (DuckDB, which keeps the first row by arrival, checks
	// neither).
	Duplicates, DedupLate, Readmitted int
	// Split counts the sessions of a batch that would have merged with a
	// session append mode had already emitted and forgotten (a batch query
	// merges them).
	Split int
	// EmptyGlobal: a global aggregation that no row reached, whose row
	// Spark emits or not by the plan it picks; not compared.
	EmptyGlobal bool
}

// OutRow is one output row: Key renders its key columns, Values holds
// every column (timestamps as int64 µs; nil for null).
type OutRow struct {
	Key    string
	Values []any
}

// Failure is a batch that fails: the error code Spark raises and the batch.
type Failure struct {
	Code string
	// Codes are every error class the batch raises (Code among them).
	Codes []string
	Batch int
}

// KeyText renders key values null-safely (a null is not the empty string).
func KeyText(vals []any) string {
	var b strings.Builder
	for i, v := range vals {
		if i > 0 {
			b.WriteByte('|')
		}
		switch v := v.(type) {
		case nil:
			b.WriteString("NULL")
		case string:
			b.WriteString(strconv.Quote(v))
		default:
			fmt.Fprint(&b, v)
		}
	}
	return b.String()
}

// group is one output key's aggregation buffers.
type group struct {
	key  []any
	rows int64
	aggs []buffer
}

// buffer is one aggregate's buffer: n non-null inputs, an exact integer
// sum (math/big: the ANSI check and the wrap are computed from it), a
// double sum, and the min and max seen.
type buffer struct {
	n        int64
	isum     big.Int
	fsum     float64
	dsum     big.Rat // a DECIMAL column's exact sum (types.go)
	min, max any
}

// Evaluate runs q over the batches (rows of schema) as Spark's
// micro-batch engine would, one batch after another.
func Evaluate(q *Query, schema []Column, batches [][]Row) Result {
	ev := newEvaluator(q, schema)
	if q.Project != nil {
		return evaluateProjection(q, ev, batches)
	}
	if q.Session != nil {
		return evaluateSession(q, ev, batches)
	}
	res := Result{Columns: ev.columns()}
	groups := map[string]*group{}
	var order []string
	// wmMs is the batch's watermark, by which every operator evicts;
	// prevMs the previous batch's, by which every operator drops late
	// input (package doc). A deduplication is operator 0: the rows it
	// passes are after prevMs, so the aggregation after it finds no window
	// instance late (each ends after its row's event time).
	wmMs, prevMs := int64(0), int64(0)
	dd := newDedupState(q, ev.idx)
	for n, batch := range batches {
		ev.codes = ev.codes[:0]
		maxMs, seen := int64(math.MinInt64), false
		for _, r := range batch {
			if !ev.pushed(r) {
				continue
			}
			if q.hasWatermark() {
				if ts := r[ev.idx[q.WatermarkColumn]]; ts != nil {
					maxMs, seen = max(maxMs, floorDiv(ts.(int64), 1000)), true
				}
			}
		}
		for _, r := range batch {
			if ev.eval(q.where(), r) != tTrue {
				continue
			}
			if dd != nil && !dd.keep(r, prevMs) {
				continue
			}
			insts := ev.instances(r)
			if len(insts) > 0 {
				// The aggregates' input expressions, once per row that
				// reaches the aggregation, late or not (Spark's partial
				// aggregate projects them before the state store drops late
				// rows).
				for i, a := range q.Aggs {
					ev.args[i] = nil
					if a.Arg != nil {
						v, code := ev.num(a.Arg, r)
						if code != "" {
							ev.codes = append(ev.codes, code)
						}
						ev.args[i] = v
					}
				}
			}
			for _, wk := range insts {
				if q.Window != nil && q.hasWatermark() && wk.end <= prevMs*1000 {
					res.Late++
					continue // late: its window is closed
				}
				key := ev.key(wk, r)
				kt := KeyText(key)
				g := groups[kt]
				if g == nil {
					g = &group{key: key, aggs: make([]buffer, len(q.Aggs))}
					groups[kt] = g
					order = append(order, kt)
				}
				if a := ev.add(g, r); a >= 0 && q.ANSI || ev.decOver {
					ev.codes = append(ev.codes, "ARITHMETIC_OVERFLOW")
				}
				ev.decOver = false
			}
		}
		if len(ev.codes) > 0 {
			// Spark raises the first error of its row order; ethstream
			// evaluates a batch column by column, so with several errors in
			// one batch either may be reported: the batch and the set of
			// classes are what is compared.
			res.Fail = &Failure{Code: ev.codes[0], Codes: slices.Compact(slices.Sorted(slices.Values(ev.codes))), Batch: n}
			return res
		}
		if dd != nil {
			dd.evict(wmMs)
		}
		prevMs = wmMs
		if seen {
			wmMs = max(wmMs, maxMs-q.Watermark.Milliseconds())
		}
	}
	if dd != nil {
		res.Duplicates, res.DedupLate, res.Readmitted = dd.dropped, dd.late, dd.readmitted
	}
	if q.Window == nil && len(q.Keys) == 0 && len(q.KeyExprs) == 0 && len(groups) == 0 {
		res.EmptyGlobal = true
	}
	slices.Sort(order)
	for _, kt := range order {
		g := groups[kt]
		if !ev.emitted(g, wmMs) {
			continue
		}
		if q.Having != nil && g.rows <= *q.Having {
			continue // HAVING count(*) > k: count(*) only grows, so the last emission is the final value
		}
		vals := slices.Clone(g.key)
		for _, i := range q.aggOrder() {
			vals = append(vals, ev.result(q.Aggs[i], &g.aggs[i], g.rows))
		}
		res.Rows = append(res.Rows, OutRow{Key: kt, Values: vals})
	}
	if len(q.Order) > 0 || q.Limit != nil {
		ev.orderLimit(&res)
	}
	return res
}

// orderLimit sorts the final rows by the query's ORDER BY (Spark's
// orderings: nulls first ascending and last descending, NaN above every
// double, -0.0 equal to 0.0) and keeps the first LIMIT of them: complete
// mode's last batch, which is the whole result.
func (ev *evaluator) orderLimit(res *Result) {
	var idx []int
	var desc []bool
	for _, k := range ev.q.Order {
		names := []string{k.Column}
		if k.Column == "window" {
			names = []string{"window_start", "window_end"}
		}
		for _, n := range names {
			idx = append(idx, slices.Index(res.Columns, n))
			desc = append(desc, k.Desc)
		}
	}
	slices.SortStableFunc(res.Rows, func(a, b OutRow) int {
		for i, c := range idx {
			x, y := a.Values[c], b.Values[c]
			switch {
			case x == nil && y == nil:
				continue
			case x == nil:
				if desc[i] {
					return 1
				}
				return -1
			case y == nil:
				if desc[i] {
					return -1
				}
				return 1
			}
			r := orderValues(x, y)
			if desc[i] {
				r = -r
			}
			if r != 0 {
				return r
			}
		}
		return 0
	})
	if l := ev.q.Limit; l != nil && int64(len(res.Rows)) > *l {
		res.Rows = res.Rows[:*l]
	}
}

// orderValues compares two non-null values of one column.
func orderValues(x, y any) int {
	switch x := x.(type) {
	case int64:
		return cmpInt(x, y.(int64))
	case string:
		return strings.Compare(x, y.(string))
	case Decimal:
		return x.rat().Cmp(y.(Decimal).rat())
	case float64:
		yf := y.(float64)
		switch xn, yn := math.IsNaN(x), math.IsNaN(yf); {
		case xn && yn:
			return 0
		case xn:
			return 1
		case yn:
			return -1
		case x < yf:
			return -1
		case x > yf:
			return 1
		}
		return 0
	}
	panic(fmt.Sprintf("order value %T", x))
}

// emitted reports whether group g is in the final table under the query's
// output mode, given the watermark after the last batch (the final no-data
// batch runs with it): append emits a window once its end is at or below
// the watermark (Spark's eviction predicate, window.end <= watermark);
// complete over windows keeps only the windows the watermark has not
// closed (ethstream's documented difference: Spark keeps them all); update
// keeps every group.
func (ev *evaluator) emitted(g *group, wmMs int64) bool {
	if ev.q.Window == nil || !ev.q.hasWatermark() {
		return true
	}
	end := g.key[1].(int64)
	switch ev.q.Mode {
	case "append":
		return end <= wmMs*1000
	case "complete":
		return end > wmMs*1000
	}
	return true
}

type evaluator struct {
	// codes are the error classes raised while evaluating the current batch.
	codes []string
	// args are the aggregates' input expressions' values at the current row.
	args   []any
	q      *Query
	idx    map[string]int
	typ    map[string]stream.Type
	pushed func(Row) bool
	// decOver: the current row took a DECIMAL sum past its precision.
	decOver bool
}

func newEvaluator(q *Query, schema []Column) *evaluator {
	ev := &evaluator{q: q, idx: map[string]int{}, typ: map[string]stream.Type{}, args: make([]any, len(q.Aggs))}
	for i, c := range schema {
		ev.idx[c.Name], ev.typ[c.Name] = i, c.Type
	}
	// PushPredicateThroughNonJoin: the conjuncts of the WHERE that do not
	// read the watermark's column run below EventTimeWatermark.
	var below []Expr
	for _, c := range conjuncts(q.where()) {
		if !q.hasWatermark() || !reads(c, q.WatermarkColumn) {
			below = append(below, c)
		}
	}
	ev.pushed = func(r Row) bool {
		for _, c := range below {
			if ev.eval(c, r) != tTrue {
				return false
			}
		}
		return true
	}
	return ev
}

func conjuncts(e Expr) []Expr {
	if a, ok := e.(And); ok {
		return append(conjuncts(a.L), conjuncts(a.R)...)
	}
	if e == nil {
		return nil
	}
	return []Expr{e}
}

// reads reports whether e reads column name.
func reads(e Expr, name string) bool {
	op := func(o Operand) bool { return operandReads(o, name) }
	switch e := e.(type) {
	case And:
		return reads(e.L, name) || reads(e.R, name)
	case Or:
		return reads(e.L, name) || reads(e.R, name)
	case Not:
		return reads(e.X, name)
	case Cmp:
		return op(e.L) || op(e.R)
	case In:
		return op(e.X)
	case Between:
		return op(e.X) || op(e.Lo) || op(e.Hi)
	case IsNull:
		return op(e.X)
	}
	panic(fmt.Sprintf("sparkref: expression %T", e))
}

func (ev *evaluator) columns() []string {
	var cols []string
	if ev.q.Window != nil {
		cols = append(cols, "window_start", "window_end")
	}
	cols = append(cols, ev.q.Keys...)
	for _, k := range ev.q.KeyExprs {
		cols = append(cols, k.Alias)
	}
	for _, i := range ev.q.aggOrder() {
		cols = append(cols, ev.q.Aggs[i].Name())
	}
	return cols
}

// instance is one window a row belongs to (start, end in µs).
type instance struct{ start, end int64 }

// instances are the windows of row r: every [s, s+size) with s = start +
// k*slide containing its event time, none for a null one; one
// pseudo-instance without a window.
func (ev *evaluator) instances(r Row) []instance {
	w := ev.q.Window
	if w == nil {
		return []instance{{}}
	}
	v := r[ev.idx[w.Column]]
	if v == nil {
		return nil
	}
	ts := v.(int64)
	size, slide, start := w.Size.Microseconds(), w.Slide.Microseconds(), w.Start.Microseconds()
	var out []instance
	// The latest window start at or before ts, then back by slides while
	// the window still contains ts.
	s := start + floorDiv(ts-start, slide)*slide
	for ; s+size > ts; s -= slide {
		out = append(out, instance{s, s + size})
	}
	slices.Reverse(out)
	return out
}

func (ev *evaluator) key(wk instance, r Row) []any {
	var k []any
	if ev.q.Window != nil {
		k = append(k, wk.start, wk.end)
	}
	for _, c := range ev.q.Keys {
		k = append(k, r[ev.idx[c]])
	}
	for _, e := range ev.q.KeyExprs {
		v := r[ev.idx[e.Column]]
		if v != nil {
			switch e.Func {
			case "lower":
				v = strings.ToLower(v.(string))
			case "mod3":
				v = v.(int64) % 3 // Java's remainder: the sign of the dividend
			case "hour":
				v = floorDiv(v.(int64), 3_600_000_000) * 3_600_000_000
			case "str":
				v = castString(ev.typ[e.Column], v)
			}
		}
		k = append(k, v)
	}
	return k
}

var (
	minLong = big.NewInt(math.MinInt64)
	maxLong = big.NewInt(math.MaxInt64)
)

// add folds r into g and returns the first aggregate whose BIGINT sum
// left BIGINT, or -1.
func (ev *evaluator) add(g *group, r Row) int {
	g.rows++
	over := -1
	for i, a := range ev.q.Aggs {
		b := &g.aggs[i]
		if a.Column == "" && a.Arg == nil {
			continue
		}
		var v any
		if a.Arg != nil {
			v = ev.args[i]
		} else {
			v = r[ev.idx[a.Column]]
		}
		if v == nil {
			continue
		}
		b.n++
		switch x := v.(type) {
		case int64:
			b.isum.Add(&b.isum, big.NewInt(x))
			b.fsum += float64(x)
			if (a.Func == "sum" || a.Func == "ratio") && over < 0 && (b.isum.Cmp(minLong) < 0 || b.isum.Cmp(maxLong) > 0) {
				over = i
			}
			if b.min == nil || x < b.min.(int64) {
				b.min = x
			}
			if b.max == nil || x > b.max.(int64) {
				b.max = x
			}
		case float64:
			b.fsum += x
			if b.min == nil || x < b.min.(float64) {
				b.min = x
			}
			if b.max == nil || x > b.max.(float64) {
				b.max = x
			}
		case string:
			// count only (the generator aggregates strings with count)
		case Decimal:
			t := ev.typ[a.Column]
			b.dsum.Add(&b.dsum, x.rat())
			if a.Func == "sum" || a.Func == "avg" {
				if _, o := decimalResult(a.Func, t, b); o {
					ev.decOver = true
				}
			}
			if b.min == nil || x.rat().Cmp(b.min.(Decimal).rat()) < 0 {
				b.min = x
			}
			if b.max == nil || x.rat().Cmp(b.max.(Decimal).rat()) > 0 {
				b.max = x
			}
		}
	}
	return over
}

// result is aggregate a's value from its buffer.
func (ev *evaluator) result(a Agg, b *buffer, rows int64) any {
	if a.Func == "count" {
		if a.Column == "" && a.Arg == nil {
			return rows
		}
		return b.n
	}
	if b.n == 0 {
		return nil
	}
	switch a.Func {
	case "ratio": // sum(x) / count(*): a DOUBLE division of the (wrapped) sum
		if ev.typ[a.Column] == stream.Float64 {
			return b.fsum / float64(rows)
		}
		var m big.Int
		m.And(&b.isum, new(big.Int).SetUint64(math.MaxUint64))
		return float64(int64(m.Uint64())) / float64(rows)
	case "sum", "avg":
		if t := ev.typ[a.Column]; a.Arg == nil && t.Kind() == stream.Decimal {
			v, _ := decimalResult(a.Func, t, b)
			return v
		}
	}
	switch a.Func {
	case "sum":
		if a.Arg != nil && ev.numType(a.Arg) == stream.Float64 || a.Arg == nil && ev.typ[a.Column].Storage() == stream.Float64 {
			return b.fsum // FLOAT sums as DOUBLE
		}
		// A wrapped sum (ANSI off) is the exact sum modulo 2^64.
		var m big.Int
		m.And(&b.isum, new(big.Int).SetUint64(math.MaxUint64))
		return int64(m.Uint64())
	case "avg":
		return b.fsum / float64(b.n)
	case "min":
		return b.min
	case "max":
		return b.max
	}
	panic("sparkref: aggregate " + a.Func)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// tri is SQL's three-valued logic.
type tri uint8

const (
	tFalse tri = iota
	tTrue
	tNull
)

func (t tri) not() tri {
	switch t {
	case tTrue:
		return tFalse
	case tFalse:
		return tTrue
	}
	return tNull
}

func and(a, b tri) tri {
	if a == tFalse || b == tFalse {
		return tFalse
	}
	if a == tNull || b == tNull {
		return tNull
	}
	return tTrue
}

func or(a, b tri) tri {
	if a == tTrue || b == tTrue {
		return tTrue
	}
	if a == tNull || b == tNull {
		return tNull
	}
	return tFalse
}

// eval evaluates a condition at row r; an error Spark raises for the row
// (ANSI arithmetic) is added to ev.codes and the condition is unknown.
// AND and OR evaluate their right side only when the left does not decide,
// as Spark's do.
func (ev *evaluator) eval(e Expr, r Row) tri {
	switch e := e.(type) {
	case nil:
		return tTrue
	case And:
		l := ev.eval(e.L, r)
		if l == tFalse {
			return tFalse
		}
		return and(l, ev.eval(e.R, r))
	case Or:
		l := ev.eval(e.L, r)
		if l == tTrue {
			return tTrue
		}
		return or(l, ev.eval(e.R, r))
	case Not:
		return ev.eval(e.X, r).not()
	case Cmp:
		if isExpr(e.L) || isExpr(e.R) {
			t, code := ev.compareNum(e.Op, e.L, e.R, r)
			if code != "" {
				ev.codes = append(ev.codes, code)
			}
			return t
		}
		return ev.compare(e.Op, e.L, e.R, r, false)
	case Between:
		t := and(ev.compare(">=", e.X, e.Lo, r, false), ev.compare("<=", e.X, e.Hi, r, false))
		if e.Not {
			return t.not()
		}
		return t
	case IsNull:
		null := ev.value(e.X, r) == nil
		if null != e.Not {
			return tTrue
		}
		return tFalse
	case In:
		asDouble := false
		for _, l := range e.List {
			asDouble = asDouble || l.Kind == LitDouble
		}
		t := tFalse
		for _, l := range e.List {
			t = or(t, ev.compare("=", e.X, l, r, asDouble))
		}
		if e.Not {
			return t.not()
		}
		return t
	}
	panic(fmt.Sprintf("sparkref: expression %T", e))
}

// value is an operand's value: a column's (nil, int64, float64, string),
// or a literal itself (Lit; nil for NULL).
func (ev *evaluator) value(o Operand, r Row) any {
	switch o := o.(type) {
	case Col:
		return r[ev.idx[o.Name]]
	case Lit:
		if o.Kind == LitNull {
			return nil
		}
		return o
	}
	panic(fmt.Sprintf("sparkref: operand %T", o))
}

// typeOf is the Spark type of a column operand (0 for a literal).
func (ev *evaluator) typeOf(o Operand) stream.Type {
	if c, ok := o.(Col); ok {
		return ev.typ[c.Name]
	}
	return 0
}

// compare evaluates l op r with Spark's coercion: a literal is cast to the
// column's type, BIGINT meets DECIMAL exactly and DOUBLE as a double
// (asDouble forces doubles: an IN list holding a DOUBLE).
func (ev *evaluator) compare(op string, l, r Operand, row Row, asDouble bool) tri {
	lt, rt := ev.typeOf(l), ev.typeOf(r)
	lv, rv := ev.value(l, row), ev.value(r, row)
	if lv == nil || rv == nil {
		return tNull
	}
	if lt == 0 && rt != 0 { // literal op column: compare the other way round
		return ev.compare(flip(op), r, l, row, asDouble)
	}
	if isNew(lt) {
		c, _ := compareNew(lt, lv, rv)
		return truth(op, c)
	}
	var c int
	switch x := lv.(type) {
	case int64:
		if lt == stream.Timestamp {
			y, ok := asTimestamp(rv)
			if !ok {
				return tNull
			}
			c = cmpInt(x, y)
			break
		}
		switch y := rv.(type) {
		case int64:
			c = cmpInt(x, y)
		case Lit:
			var ok bool
			if c, ok = cmpBigint(x, y, asDouble, ev.q.ANSI); !ok {
				return tNull
			}
		default:
			panic(fmt.Sprintf("sparkref: BIGINT compared with %T", rv))
		}
	case float64:
		var y float64
		switch v := rv.(type) {
		case float64:
			y = v
		case Lit:
			var ok bool
			if y, ok = litDouble(v); !ok {
				return tNull
			}
		}
		c = cmpFloat(x, y)
	case string:
		var y string
		switch v := rv.(type) {
		case string:
			y = v
		case Lit:
			y = v.Str
		}
		c = strings.Compare(x, y)
	default:
		panic(fmt.Sprintf("sparkref: comparison of %T", lv))
	}
	return truth(op, c)
}

func flip(op string) string {
	switch op {
	case "<":
		return ">"
	case "<=":
		return ">="
	case ">":
		return "<"
	case ">=":
		return "<="
	}
	return op
}

func truth(op string, c int) tri {
	var t bool
	switch op {
	case "=", "==":
		t = c == 0
	case "<>", "!=":
		t = c != 0
	case "<":
		t = c < 0
	case "<=":
		t = c <= 0
	case ">":
		t = c > 0
	case ">=":
		t = c >= 0
	default:
		panic("sparkref: operator " + op)
	}
	if t {
		return tTrue
	}
	return tFalse
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpFloat orders as Spark does: NaN above everything, equal to itself.
func cmpFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpBigint compares a BIGINT value with a literal; false when the
// literal is a string that does not cast (null outside ANSI mode).
func cmpBigint(x int64, l Lit, asDouble, ansi bool) (int, bool) {
	if asDouble {
		y, ok := litDouble(l)
		return cmpFloat(float64(x), y), ok
	}
	switch l.Kind {
	case LitBigint:
		return cmpInt(x, l.Int), true
	case LitDecimal:
		return new(big.Rat).SetInt64(x).Cmp(l.Dec), true
	case LitDouble:
		return cmpFloat(float64(x), l.Float), true
	case LitString:
		y, err := strconv.ParseInt(strings.TrimSpace(l.Str), 10, 64)
		if err != nil {
			if ansi {
				panic("sparkref: the generator wrote a string that does not cast: " + l.Str)
			}
			return 0, false
		}
		return cmpInt(x, y), true
	}
	panic(fmt.Sprintf("sparkref: BIGINT compared with literal kind %d", l.Kind))
}

func litDouble(l Lit) (float64, bool) {
	switch l.Kind {
	case LitBigint:
		return float64(l.Int), true
	case LitDecimal:
		f, _ := l.Dec.Float64()
		return f, true
	case LitDouble:
		return l.Float, true
	case LitString:
		f, err := strconv.ParseFloat(strings.TrimSpace(l.Str), 64)
		return f, err == nil
	}
	panic(fmt.Sprintf("sparkref: literal kind %d as a double", l.Kind))
}

// asTimestamp casts a literal to a TIMESTAMP (µs, UTC): a TIMESTAMP, a
// DATE (midnight) or a string in 'yyyy-mm-dd[ hh:mm:ss]'.
func asTimestamp(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case Lit:
		switch v.Kind {
		case LitTimestamp, LitDate:
			return v.Int, true
		case LitString:
			s := strings.TrimSpace(v.Str)
			for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02"} {
				if t, err := time.Parse(layout, s); err == nil {
					return t.UnixMicro(), true
				}
			}
			return 0, false
		}
	}
	panic(fmt.Sprintf("sparkref: %T as a timestamp", v))
}
