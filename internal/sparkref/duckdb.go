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
// schema's columns (timestamps as TIMESTAMP), with Spark's semantics
// spelled out where DuckDB's defaults differ: each literal cast the way
// Spark's coercion casts it, windows expanded per instance, a BIGINT sum
// cast back to BIGINT (an overflow errors) or, outside ANSI mode, wrapped.
// The output columns are Result's: window start and end as µs, the keys,
// the aggregates (timestamps as µs). It is a batch query: it knows no
// watermark, so it agrees with a stream only where no row was late.
func (q *Query) DuckDB(schema []Column) string {
	typ := map[string]stream.Type{}
	for _, c := range schema {
		typ[c.Name] = c.Type
	}
	d := &duck{typ: typ}
	var sel, group []string
	from := "blocks"
	where := ""
	if w := q.where(); w != nil {
		where = " WHERE " + d.expr(w)
	}
	if w := q.Window; w != nil {
		size, slide, start := w.Size.Microseconds(), w.Slide.Microseconds(), w.Start.Microseconds()
		n := (size + slide - 1) / slide
		from = fmt.Sprintf(`(SELECT w.* FROM (SELECT t.*, (%d + ((epoch_us(t.%s) - %d) // %d) * %d) - k.k * %d AS __ws, epoch_us(t.%s) AS __t
  FROM (SELECT * FROM blocks%s) t, range(0, %d) AS k(k) WHERE t.%s IS NOT NULL) w WHERE w.__ws + %d > w.__t)`,
			start, ident(w.Column), start, slide, slide, slide, ident(w.Column), where, n, ident(w.Column), size)
		where = ""
		sel = append(sel, "__ws", fmt.Sprintf("__ws + %d", size))
		group = append(group, "__ws")
	}
	for _, k := range q.Keys {
		if typ[k] == stream.Timestamp {
			sel = append(sel, "epoch_us("+ident(k)+")")
		} else {
			sel = append(sel, ident(k))
		}
		group = append(group, ident(k))
	}
	for _, a := range q.Aggs {
		sel = append(sel, d.agg(a, q.ANSI))
	}
	s := "SELECT " + strings.Join(sel, ", ") + " FROM " + from + where
	if len(group) > 0 {
		s += " GROUP BY " + strings.Join(group, ", ")
	}
	return s
}

// DuckDBChecks reports whether DuckDB's batch answer to q.DuckDB(schema)
// is the table the stream leaves, once no row was late: q's GROUP BY is
// the whole result (update mode, or no window: append and complete over
// windows leave only the closed or open ones), without a deduplication
// (which keeps rows by arrival), a LIMIT or an expression (DuckDB's
// division by zero and overflow differ: Expressions), and every column q
// reads is a BIGINT, DOUBLE, STRING or TIMESTAMP (the types duckref
// loads; the other types are the oracle's alone).
func (q *Query) DuckDBChecks(schema []Column) bool {
	if q.Mode != "update" && q.Window != nil || q.Dedup != nil || q.Limit != nil || q.Project != nil || q.Expressions() {
		return false
	}
	for _, c := range schema {
		if DuckDBType(c.Type) || !q.reads(c.Name) {
			continue
		}
		return false
	}
	return true
}

// DuckDBType reports whether duckref loads columns of type t: BIGINT,
// DOUBLE, STRING and TIMESTAMP.
func DuckDBType(t stream.Type) bool {
	switch t {
	case stream.Int64, stream.Float64, stream.String, stream.Timestamp:
		return true
	}
	return false
}

// reads reports whether q reads column name: a window's time, a key, an
// aggregate's input or a WHERE's operand.
func (q *Query) reads(name string) bool {
	if q.Window != nil && q.Window.Column == name || slices.Contains(q.Keys, name) {
		return true
	}
	for _, a := range q.Aggs {
		if a.Column == name {
			return true
		}
	}
	w := q.where()
	return w != nil && reads(w, name)
}

type duck struct{ typ map[string]stream.Type }

func ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func (d *duck) agg(a Agg, ansi bool) string {
	if a.Column == "" {
		return "count(*)"
	}
	c := ident(a.Column)
	switch a.Func {
	case "count", "avg":
		return a.Func + "(" + c + ")"
	case "sum":
		if d.typ[a.Column] != stream.Int64 {
			return "sum(" + c + ")"
		}
		if ansi {
			return "CAST(sum(" + c + ") AS BIGINT)"
		}
		return "CAST((((sum(" + c + ")::HUGEINT + 9223372036854775808) % 18446744073709551616) + 18446744073709551616) % 18446744073709551616 - 9223372036854775808 AS BIGINT)"
	}
	if d.typ[a.Column] == stream.Timestamp {
		return "epoch_us(" + a.Func + "(" + c + "))"
	}
	return a.Func + "(" + c + ")"
}

func (d *duck) expr(e Expr) string {
	switch e := e.(type) {
	case And:
		return "(" + d.expr(e.L) + " AND " + d.expr(e.R) + ")"
	case Or:
		return "(" + d.expr(e.L) + " OR " + d.expr(e.R) + ")"
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
		t := d.colType(e.L, e.R)
		op := map[string]string{"==": "=", "!=": "<>"}[e.Op]
		if op == "" {
			op = e.Op
		}
		return fmt.Sprintf("(%s %s %s)", d.side(e.L, e.R, t), op, d.side(e.R, e.L, t))
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
