package sparkref

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// DuckDB renders q as a DuckDB batch query over a table blocks of the
// schema's columns (timestamps as TIMESTAMP, DATE as DATE, ...) and an
// arrival-order column __seq, with Spark's semantics spelled out where
// DuckDB's defaults differ: each literal cast the way Spark's coercion
// casts it, windows expanded per instance, a deduplication as the first
// row by arrival of each key (row_number over __seq) after the WHERE, a
// BIGINT sum or arithmetic computed in HUGEINT and cast back to BIGINT (an
// overflow errors) or, outside ANSI mode, wrapped, Spark's / as a DOUBLE
// division, a division by zero null (or an error under ANSI), append and
// complete mode over windows as the windows the final watermark closed
// (or left open). The output columns are Result's: window start and end as
// µs, the keys, the aggregates (timestamps as µs, DATE as days, the small
// integers and BOOLEAN as BIGINT, FLOAT as DOUBLE, DECIMAL as its text).
// It is a batch query: it knows no watermark but the final one, so it
// agrees with a stream only where no row was late.
func (q *Query) DuckDB(schema []Column) string {
	typ := map[string]stream.Type{}
	for _, c := range schema {
		typ[c.Name] = c.Type
	}
	d := &duck{typ: typ, ansi: q.ANSI}
	rows := "blocks"
	if w := q.where(); w != nil {
		rows = "(SELECT * FROM blocks WHERE " + d.expr(w) + ")"
		if q.ANSI && whereArith(w) {
			// The conjuncts below the watermark run over every row first
			// (the oracle's pushed), each row's in order until one is not
			// true: their errors are raised whatever the rest decides.
			var below Expr
			for _, c := range conjuncts(w) {
				if !q.hasWatermark() || !reads(c, q.WatermarkColumn) {
					if below == nil {
						below = c
					} else {
						below = And{L: below, R: c}
					}
				}
			}
			if below != nil {
				rows = "(SELECT * FROM blocks WHERE (SELECT count(*) FROM blocks WHERE " + d.expr(below) + ") >= 0 AND " + d.expr(w) + ")"
			}
		}
	}
	if q.Dedup != nil {
		var part []string
		for _, c := range q.Dedup.Columns {
			part = append(part, ident(c))
		}
		rows = fmt.Sprintf("(SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY %s ORDER BY __seq) AS __rn FROM %s) WHERE __rn = 1)", strings.Join(part, ", "), rows)
	}
	if q.Session != nil {
		return d.session(q, rows)
	}
	if q.Project != nil {
		var sel []string
		for _, c := range q.Project {
			sel = append(sel, d.out(ident(c), typ[c]))
		}
		return "SELECT " + strings.Join(sel, ", ") + " FROM " + rows + " AS __r"
	}
	var sel, group []string
	from := rows + " AS __r"
	if w := q.Window; w != nil {
		size, slide, start := w.Size.Microseconds(), w.Slide.Microseconds(), w.Start.Microseconds()
		n := (size + slide - 1) / slide
		from = fmt.Sprintf(`(SELECT w.* FROM (SELECT t.*, (%d + ((epoch_us(t.%s) - %d) // %d) * %d) - k.k * %d AS __ws, epoch_us(t.%s) AS __t
  FROM %s t, range(0, %d) AS k(k) WHERE t.%s IS NOT NULL) w WHERE w.__ws + %d > w.__t)`,
			start, ident(w.Column), start, slide, slide, slide, ident(w.Column), rows, n, ident(w.Column), size)
		sel = append(sel, "__ws AS window_start", fmt.Sprintf("__ws + %d AS window_end", size))
		group = append(group, "__ws")
	}
	for _, k := range q.Keys {
		sel = append(sel, d.out(ident(k), typ[k])+" AS "+ident(k))
		group = append(group, ident(k))
	}
	for _, k := range q.KeyExprs {
		e := d.keyExpr(k)
		sel = append(sel, e+" AS "+ident(k.Alias))
		group = append(group, e)
	}
	var aggs []string
	for _, i := range q.aggOrder() {
		aggs = append(aggs, d.agg(q.Aggs[i]))
		sel = append(sel, aggs[len(aggs)-1]+" AS "+ident(q.Aggs[i].Name()))
	}
	s := "SELECT " + strings.Join(sel, ", ") + ", " + groupCount(aggs) + " AS __n FROM " + from
	if len(group) > 0 {
		s += " GROUP BY " + strings.Join(group, ", ")
	}
	var filters []string
	if q.Having != nil {
		filters = append(filters, fmt.Sprintf("__n > %d", *q.Having))
	}
	if q.Window != nil && q.hasWatermark() && q.Mode != "update" {
		op := "<="
		if q.Mode == "complete" {
			op = ">"
		}
		filters = append(filters, "CASE WHEN __n >= 0 THEN window_end "+op+" "+d.finalWatermark(q)+" END")
	}
	s = filtered(s, q.outputColumns(), filters)
	for i, k := range q.Order {
		if i == 0 {
			s += " ORDER BY "
		} else {
			s += ", "
		}
		cols := []string{ident(k.Column)}
		if k.Column == "window" {
			cols = []string{"window_start", "window_end"}
		}
		for j, c := range cols {
			if j > 0 {
				s += ", "
			}
			if k.Desc {
				s += c + " DESC NULLS LAST"
			} else {
				s += c + " ASC NULLS FIRST"
			}
		}
	}
	if q.Limit != nil {
		s += fmt.Sprintf(" LIMIT %d", *q.Limit)
	}
	return s
}

// finalWatermark is the watermark after the last batch, in µs: the
// largest event time (ms) of the rows the conjuncts below the watermark
// keep, minus the delay, and 0 before any.
func (d *duck) finalWatermark(q *Query) string {
	var below []string
	for _, c := range conjuncts(q.where()) {
		if !reads(c, q.WatermarkColumn) {
			below = append(below, d.expr(c))
		}
	}
	where := ""
	if len(below) > 0 {
		where = " WHERE " + strings.Join(below, " AND ")
	}
	return fmt.Sprintf("greatest(0, coalesce((SELECT max(epoch_ms(%s)) FROM blocks%s) - %d, 0)) * 1000",
		ident(q.WatermarkColumn), where, q.Watermark.Milliseconds())
}

// out renders the value e of type t as the case file's cells hold it.
func (d *duck) out(e string, t stream.Type) string {
	switch t.Kind() {
	case stream.Timestamp, stream.TimestampNTZ:
		return "epoch_us(" + e + ")"
	case stream.Boolean, stream.Int8, stream.Int16, stream.Int32:
		return "CAST(" + e + " AS BIGINT)"
	case stream.Float32:
		return "CAST(" + e + " AS DOUBLE)"
	case stream.Date:
		return "datediff('day', DATE '1970-01-01', " + e + ")"
	case stream.Decimal:
		return "CAST(" + e + " AS VARCHAR)"
	case stream.Binary:
		return "lower(hex(" + e + "))"
	}
	return e
}

// keyExpr renders a group key expression as Spark computes it.
func (d *duck) keyExpr(k KeyExpr) string {
	c := ident(k.Column)
	switch k.Func {
	case "lower":
		return "lower(" + c + ")"
	case "mod3":
		return "(" + c + " % 3)" // truncated, the sign of the dividend: Java's
	case "str":
		return "CAST(" + c + " AS VARCHAR)"
	}
	return "epoch_us(date_trunc('hour', " + c + "))"
}

// DuckDBChecks reports whether DuckDB's batch answer to q.DuckDB(schema)
// is the table the stream leaves, once no row was late: DuckDBExcluded
// gives no reason against it.
func (q *Query) DuckDBChecks(schema []Column) bool { return q.DuckDBExcluded(schema) == "" }

// DuckDBExcluded is why DuckDB does not check q ("" when it does): a
// session window in update mode (refused), an average of a DECIMAL
// (DuckDB's is a DOUBLE), or a column q reads of a type duckref does not
// load.
func (q *Query) DuckDBExcluded(schema []Column) string {
	typ := map[string]stream.Type{}
	for _, c := range schema {
		typ[c.Name] = c.Type
	}
	if q.Session != nil && q.Mode == "update" {
		return "session window in update mode (refused)"
	}
	for _, a := range q.Aggs {
		if a.Func == "avg" && a.Arg == nil && typ[a.Column].Kind() == stream.Decimal {
			return "avg of a DECIMAL"
		}
	}
	for _, c := range schema {
		if DuckDBType(c.Type) || !q.reads(c.Name) {
			continue
		}
		return "column type " + c.Type.String()
	}
	return ""
}

// whereArith reports whether e computes arithmetic.
func whereArith(e Expr) bool {
	switch e := e.(type) {
	case And:
		return whereArith(e.L) || whereArith(e.R)
	case Or:
		return whereArith(e.L) || whereArith(e.R)
	case Not:
		return whereArith(e.X)
	case Cmp:
		return isExpr(e.L) || isExpr(e.R)
	}
	return false
}

// DuckDBType reports whether duckref loads columns of type t: all of
// them (a BINARY one as its hex).
func DuckDBType(stream.Type) bool { return true }

// reads reports whether q reads column name: a window's time, a key, an
// aggregate's input, a WHERE's operand, a deduplication's or projection's
// column.
func (q *Query) reads(name string) bool {
	if q.Window != nil && q.Window.Column == name || slices.Contains(q.Keys, name) || slices.Contains(q.Project, name) {
		return true
	}
	if q.Dedup != nil && slices.Contains(q.Dedup.Columns, name) {
		return true
	}
	for _, k := range q.KeyExprs {
		if k.Column == name {
			return true
		}
	}
	if s := q.Session; s != nil && (s.Column == name || s.When != nil && reads(s.When, name)) {
		return true
	}
	for _, a := range q.Aggs {
		if a.Column == name || a.Arg != nil && operandReads(a.Arg, name) {
			return true
		}
	}
	w := q.where()
	return w != nil && reads(w, name)
}

type duck struct {
	typ  map[string]stream.Type
	ansi bool
}

func ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// agg renders aggregate a with Spark's result type and overflow rule.
func (d *duck) agg(a Agg) string {
	if a.Column == "" && a.Arg == nil {
		return "count(*)"
	}
	var c string
	var t stream.Type
	if a.Arg != nil {
		c, t = d.num(a.Arg), d.numType(a.Arg)
	} else {
		c, t = ident(a.Column), d.typ[a.Column]
	}
	integral := false
	switch t.Kind() {
	case stream.Int64, stream.Int8, stream.Int16, stream.Int32:
		integral = true
	}
	switch a.Func {
	case "count":
		return "count(" + c + ")"
	case "avg":
		return "avg(CAST(" + c + " AS DOUBLE))"
	case "sum", "ratio":
		var sum string
		switch {
		case t.Kind() == stream.Decimal:
			// DuckDB's sum of a DECIMAL(38,s) is a DECIMAL(38,s) that may
			// hold more than 38 digits; Spark's sum type is checked here.
			p, sc := sumDecimal(t)
			most := strings.Repeat("9", p-sc)
			if sc > 0 {
				most += "." + strings.Repeat("9", sc)
			}
			return fmt.Sprintf("CASE WHEN abs(sum(%s)) > CAST('%s' AS DECIMAL(38,%d)) THEN error('ARITHMETIC_OVERFLOW') ELSE CAST(CAST(sum(%s) AS DECIMAL(%d,%d)) AS VARCHAR) END", c, most, sc, c, p, sc)
		case !integral:
			sum = "sum(CAST(" + c + " AS DOUBLE))"
		default:
			sum = d.bigint("sum(" + c + ")")
		}
		if a.Func == "ratio" {
			return "CAST(" + sum + " AS DOUBLE) / count(*)"
		}
		return sum
	}
	return d.out(a.Func+"("+c+")", t)
}

// bigint is the HUGEINT h as a BIGINT: checked (an overflow errors) under
// ANSI, else wrapped modulo 2^64 as Java's long.
func (d *duck) bigint(h string) string {
	if d.ansi {
		// Not a CAST: DuckDB's optimizer drops a cast from a comparison
		// with a constant (x::BIGINT <= -1 becomes x <= -1), and its error.
		return "(CASE WHEN (" + h + ") NOT BETWEEN -9223372036854775808 AND 9223372036854775807 THEN error('ARITHMETIC_OVERFLOW') ELSE CAST(" + h + " AS BIGINT) END)"
	}
	return "CAST((((" + h + ")::HUGEINT + 9223372036854775808) % 18446744073709551616 + 18446744073709551616) % 18446744073709551616 - 9223372036854775808 AS BIGINT)"
}

// numType is a numeric operand's Spark type: BIGINT or DOUBLE (arith.go).
func (d *duck) numType(o Operand) stream.Type {
	switch o := o.(type) {
	case Col:
		return d.typ[o.Name]
	case Lit:
		if o.Kind == LitDouble {
			return stream.Float64
		}
		return stream.Int64
	case Arith:
		if o.Op == "/" || d.numType(o.L) == stream.Float64 || d.numType(o.R) == stream.Float64 {
			return stream.Float64
		}
		return stream.Int64
	case Coalesce:
		if d.numType(o.X) == stream.Float64 || d.numType(o.Else) == stream.Float64 {
			return stream.Float64
		}
		return stream.Int64
	}
	panic(fmt.Sprintf("sparkref: numeric operand %T", o))
}

// num renders a numeric operand with Spark's semantics (arith.go).
func (d *duck) num(o Operand) string {
	t := d.numType(o)
	sqlT := map[stream.Type]string{stream.Int64: "BIGINT", stream.Float64: "DOUBLE"}[t]
	switch o := o.(type) {
	case Col:
		return ident(o.Name)
	case Lit:
		switch o.Kind {
		case LitNull:
			return "NULL"
		case LitDouble:
			return "CAST(" + strconv.FormatFloat(o.Float, 'g', -1, 64) + " AS DOUBLE)"
		}
		return "CAST(" + strconv.FormatInt(o.Int, 10) + " AS BIGINT)"
	case Coalesce:
		return fmt.Sprintf("coalesce(CAST(%s AS %s), CAST(%s AS %s))", d.num(o.X), sqlT, d.num(o.Else), sqlT)
	case Arith:
		l, r := d.num(o.L), d.num(o.R)
		zero := "NULL"
		if d.ansi {
			zero = "error('DIVIDE_BY_ZERO')"
		}
		if t == stream.Float64 {
			l, r = "CAST("+l+" AS DOUBLE)", "CAST("+r+" AS DOUBLE)"
			switch o.Op {
			case "/":
				return fmt.Sprintf("(CASE WHEN %s = 0 AND %s IS NOT NULL THEN %s ELSE %s / %s END)", r, l, zero, l, r)
			case "%":
				return fmt.Sprintf("(CASE WHEN %s = 0 AND %s IS NOT NULL THEN %s ELSE fmod(%s, %s) END)", r, l, zero, l, r)
			}
			return "(" + l + " " + o.Op + " " + r + ")"
		}
		if o.Op == "%" {
			return fmt.Sprintf("(CASE WHEN %s = 0 AND %s IS NOT NULL THEN %s ELSE CAST((%s)::HUGEINT %% (%s)::HUGEINT AS BIGINT) END)", r, l, zero, l, r)
		}
		return d.bigint("(" + l + ")::HUGEINT " + o.Op + " (" + r + ")::HUGEINT")
	}
	panic(fmt.Sprintf("sparkref: numeric operand %T", o))
}

func (d *duck) expr(e Expr) string {
	switch e := e.(type) {
	case And:
		l, r := d.expr(e.L), d.expr(e.R)
		if d.ansi && whereArith(e) {
			// Spark evaluates the left side first and the right only where
			// the left is not false: an error either would raise is raised
			// as there (DuckDB reorders a plain AND's sides).
			return "(CASE WHEN " + l + " IS NOT DISTINCT FROM FALSE THEN FALSE ELSE (" + l + " AND " + r + ") END)"
		}
		return "(" + l + " AND " + r + ")"
	case Or:
		l, r := d.expr(e.L), d.expr(e.R)
		if d.ansi && whereArith(e) {
			return "(CASE WHEN " + l + " IS NOT DISTINCT FROM TRUE THEN TRUE ELSE (" + l + " OR " + r + ") END)"
		}
		return "(" + l + " OR " + r + ")"
	case Not:
		return "(NOT " + d.expr(e.X) + ")"
	case IsNull:
		s := d.operand(e.X, 0, false) + " IS NULL"
		if e.Not {
			s = d.operand(e.X, 0, false) + " IS NOT NULL"
		}
		return "(" + s + ")"
	case Between:
		t := d.colType(e.X, e.Lo, e.Hi)
		s := fmt.Sprintf("(%s >= %s AND %s <= %s)", d.side(e.X, e.Lo, t), d.side(e.Lo, e.X, t), d.side(e.X, e.Hi, t), d.side(e.Hi, e.X, t))
		if e.Not {
			s = "(NOT " + s + ")"
		}
		return s
	case Cmp:
		if isExpr(e.L) || isExpr(e.R) {
			l, r := d.num(e.L), d.num(e.R)
			if d.numType(e.L) == stream.Float64 || d.numType(e.R) == stream.Float64 {
				l, r = "CAST("+l+" AS DOUBLE)", "CAST("+r+" AS DOUBLE)"
			}
			return fmt.Sprintf("(%s %s %s)", l, sqlOp(e.Op), r)
		}
		t := d.colType(e.L, e.R)
		if isNew(t) {
			return d.cmpNew(e, t)
		}
		return fmt.Sprintf("(%s %s %s)", d.side(e.L, e.R, t), sqlOp(e.Op), d.side(e.R, e.L, t))
	case In:
		t := d.colType(e.X)
		asDouble := false
		for _, l := range e.List {
			asDouble = asDouble || l.Kind == LitDouble
		}
		var list []string
		for _, l := range e.List {
			list = append(list, d.operand(l, t, asDouble))
		}
		s := fmt.Sprintf("(%s IN (%s))", d.operand(e.X, t, asDouble), strings.Join(list, ", "))
		if e.Not {
			s = "(NOT " + s + ")"
		}
		return s
	}
	panic(fmt.Sprintf("sparkref: expression %T", e))
}

// colType is the type of the first column among the operands (the one a
// literal is cast to).
func (d *duck) colType(os ...Operand) stream.Type {
	for _, o := range os {
		if c, ok := o.(Col); ok {
			return d.typ[c.Name]
		}
	}
	return 0
}

// side renders o compared with other, both as doubles when one is a
// DOUBLE literal and the column a BIGINT (Spark's coercion).
func (d *duck) side(o, other Operand, t stream.Type) string {
	l, ok := other.(Lit)
	asDouble := ok && l.Kind == LitDouble && t == stream.Int64
	if l2, ok := o.(Lit); ok && l2.Kind == LitDouble && t == stream.Int64 {
		asDouble = true
	}
	return d.operand(o, t, asDouble)
}

func (d *duck) operand(o Operand, t stream.Type, asDouble bool) string {
	if c, ok := o.(Col); ok {
		if asDouble {
			return "CAST(" + ident(c.Name) + " AS DOUBLE)"
		}
		return ident(c.Name)
	}
	l := o.(Lit)
	if l.Kind == LitNull {
		return "NULL"
	}
	if asDouble {
		f, _ := litDouble(l)
		return "CAST(" + strconv.FormatFloat(f, 'g', -1, 64) + " AS DOUBLE)"
	}
	switch t {
	case stream.Int64:
		switch l.Kind {
		case LitBigint:
			return "CAST(" + strconv.FormatInt(l.Int, 10) + " AS BIGINT)"
		case LitDecimal:
			return "CAST('" + l.Dec.FloatString(1) + "' AS DECIMAL(38,1))"
		case LitString:
			return "CAST(" + sqlString(l.Str) + " AS BIGINT)"
		}
	case stream.Float64:
		f, _ := litDouble(l)
		return "CAST(" + strconv.FormatFloat(f, 'g', -1, 64) + " AS DOUBLE)"
	case stream.Timestamp:
		us, ok := asTimestamp(l)
		if !ok {
			return "NULL"
		}
		return "TIMESTAMP '" + time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05.999999") + "'"
	case stream.String:
		return sqlString(l.Str)
	}
	panic(fmt.Sprintf("sparkref: literal kind %d against a %v column", l.Kind, t))
}

// sqlString is a standard SQL string literal (DuckDB reads backslashes
// literally).
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlOp is a comparison operator in standard SQL.
func sqlOp(op string) string {
	switch op {
	case "==":
		return "="
	case "!=":
		return "<>"
	}
	return op
}

// cmpNew renders a comparison of a column of a types.go type with a
// literal (newExpr), as compareNew decides it: a DECIMAL in the wider
// decimal type with the literal rounded HALF_UP to its scale.
func (d *duck) cmpNew(e Cmp, t stream.Type) string {
	col, lit, op := e.L, e.R, e.Op
	if _, ok := e.L.(Lit); ok {
		col, lit, op = e.R, e.L, flip(e.Op)
	}
	c := ident(col.(Col).Name)
	l := lit.(Lit)
	var v string
	switch {
	case l.Kind == LitNull:
		v = "NULL"
	case t.Kind() == stream.Boolean:
		v = map[int64]string{0: "FALSE", 1: "TRUE"}[l.Int]
	case t.Kind() == stream.Date:
		v = "DATE '" + time.Unix(l.Int*86400, 0).UTC().Format("2006-01-02") + "'"
	case t.Kind() == stream.Decimal:
		r, lp, ls := litDecimal(l)
		sc := max(t.Scale(), ls)
		rng := max(t.Precision()-t.Scale(), lp-ls)
		if rng+sc > 38 {
			sc = max(sc-(rng+sc-38), 0)
		}
		c = fmt.Sprintf("CAST(%s AS DECIMAL(38,%d))", c, sc)
		v = fmt.Sprintf("CAST('%s' AS DECIMAL(38,%d))", roundHalfUp(r, sc), sc)
	default:
		v = "CAST(" + strconv.FormatInt(l.Int, 10) + " AS BIGINT)"
	}
	return fmt.Sprintf("(%s %s %s)", c, sqlOp(op), v)
}

// session renders a session window query over rows (the input after the
// WHERE) as DuckDB computes sessions: per key, in event-time order (then
// arrival), a row starts a new session when its time is after every
// earlier row's end (t + gap), and a running sum of those starts numbers
// the sessions; the rows without a session (a null time, a null or
// non-positive gap) are left out first, as Spark's SessionWindowing
// filters them. Append mode keeps the sessions the final watermark
// closed: the stream's answer when no session was evicted before a row
// that would have joined it (Result.Split).
func (d *duck) session(q *Query, rows string) string {
	s := q.Session
	gap := strconv.FormatInt(s.Gap.Microseconds(), 10)
	if s.When != nil {
		gap = "CASE WHEN " + d.expr(s.When) + " THEN " + strconv.FormatInt(s.Then.D.Microseconds(), 10)
		if s.Else != nil {
			gap += " ELSE " + strconv.FormatInt(s.Else.D.Microseconds(), 10)
		}
		gap += " END"
	}
	var keys, sel []string
	for _, k := range q.Keys {
		keys = append(keys, ident(k))
		sel = append(sel, d.out(ident(k), d.typ[k])+" AS "+ident(k))
	}
	part := strings.Join(keys, ", ")
	names := q.sessionColumns()
	sel = append([]string{"min(__t) AS " + ident(names[0]), "max(__t + __g) AS " + ident(names[1])}, sel...)
	var aggs []string
	for _, i := range q.aggOrder() {
		aggs = append(aggs, d.agg(q.Aggs[i]))
		sel = append(sel, aggs[len(aggs)-1]+" AS "+ident(q.Aggs[i].Name()))
	}
	sel = append(sel, groupCount(aggs)+" AS __n")
	out := fmt.Sprintf(`SELECT %s FROM (SELECT *, sum(__new) OVER (PARTITION BY %s ORDER BY __t, __seq ROWS UNBOUNDED PRECEDING) AS __sid
  FROM (SELECT *, CASE WHEN __t <= max(__t + __g) OVER (PARTITION BY %s ORDER BY __t, __seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS __new
  FROM (SELECT *, epoch_us(%s) AS __t, %s AS __g FROM %s AS __r) WHERE __t IS NOT NULL AND __g > 0)) GROUP BY %s, __sid`,
		strings.Join(sel, ", "), part, part, ident(s.Column), gap, rows, part)
	var filters []string
	if q.Having != nil {
		filters = append(filters, fmt.Sprintf("__n > %d", *q.Having))
	}
	if q.Mode == "append" {
		filters = append(filters, "CASE WHEN __n >= 0 THEN "+ident(names[1])+" <= "+d.finalWatermark(q)+" END")
	}
	return filtered(out, names, filters)
}

// groupCount is count(*) computed with every aggregate of aggs, so that
// a filter reading it (HAVING, the final watermark's, each through __n)
// computes them for every group: an overflow in a group the filter drops
// still fails the query, as in Spark, whose aggregation raises it before
// any filter above (DuckDB pushes a filter below the projection).
func groupCount(aggs []string) string {
	if len(aggs) == 0 {
		return "count(*)"
	}
	parts := make([]string, len(aggs))
	for i, a := range aggs {
		parts[i] = "CAST(" + a + " AS VARCHAR)"
	}
	return "count(*) + 0 * length(concat(" + strings.Join(parts, ", ") + "))"
}

// filtered selects the columns names of the groups query s keeps that
// pass filters (HAVING, the final watermark's).
func filtered(s string, names, filters []string) string {
	cols := make([]string, len(names))
	for i, n := range names {
		cols[i] = ident(n)
	}
	out := "WITH __g AS MATERIALIZED (" + s + ") SELECT " + strings.Join(cols, ", ") + " FROM __g"
	if len(filters) > 0 {
		out += " WHERE " + strings.Join(filters, " AND ")
	}
	return out
}

// outputColumns are an aggregation's output columns (Result's).
func (q *Query) outputColumns() []string {
	var cols []string
	if q.Window != nil {
		cols = append(cols, "window_start", "window_end")
	}
	cols = append(cols, q.Keys...)
	for _, k := range q.KeyExprs {
		cols = append(cols, k.Alias)
	}
	for _, i := range q.aggOrder() {
		cols = append(cols, q.Aggs[i].Name())
	}
	return cols
}
