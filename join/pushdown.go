package join

import (
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

// A WHERE over a join's rows, pushed below the join as Spark's optimizer
// pushes it. Spark plans the WHERE as a Filter above the Join; two rules
// of its operator-optimization batch rewrite that pair until neither
// applies:
//
//   - EliminateOuterJoin turns an outer join into a narrower one when the
//     WHERE rejects the rows a side fills with nulls: a conjunct reading
//     only that side's columns that is NULL or FALSE when they are all
//     null (canFilterOutNull), or a column of that side under comparisons,
//     arithmetic, NOT, CAST and LIKE alone from a conjunct's root (the
//     IsNotNull constraint Spark infers from a null-intolerant
//     expression: a.id < b.id rejects a null b.id). LEFT and RIGHT OUTER
//     become INNER when the null-supplying side is rejected; FULL OUTER
//     becomes LEFT OUTER (the left side rejected), RIGHT OUTER (the
//     right), or INNER (both).
//   - PushPredicateThroughJoin splits the WHERE at its top-level ANDs and
//     moves each conjunct that reads one side's columns only (a conjunct
//     reading no column counts as the left side's) into that side, where
//     the join type allows: both sides of an INNER join, the preserved
//     side of a LEFT or RIGHT OUTER join, the left side of a LEFT SEMI
//     join, neither side of a FULL OUTER join. The rest stays above the
//     join (an INNER join's conjuncts reading both sides go into Spark's
//     join condition instead: the same rows, since an inner join emits
//     only matched pairs).
//
// A pushed conjunct then meets the side's WATERMARK: Spark's
// PushPredicateThroughNonJoin moves one that does not read the event-time
// column below it too, so only the rows it keeps advance the side's
// watermark (flow.Side.Where). The join's state holds only the rows the
// pushed conjuncts keep.
//
// The join type Spark's streaming checks see is the one written
// (UnsupportedOperationChecker runs on the analyzed plan): a LEFT OUTER
// JOIN still needs its watermarks and time range though its WHERE makes
// it inner. Every expression here is deterministic, so each conjunct may
// move.

// Pushed is where a WHERE over a join's rows runs (Pushdown).
type Pushed struct {
	// Type is the join's type after EliminateOuterJoin.
	Type Type
	// Sides are the conjuncts pushed into each side (nil: none), over the
	// side's own column names.
	Sides [2]filter.Expr
	// Rest are the conjuncts evaluated over the join's rows (nil: none),
	// over their names there.
	Rest filter.Expr
	// again are the pushed conjuncts over the join's names (Above).
	again filter.Expr
}

// origin is the relation and column a name of the join's rows comes from.
type origin struct {
	side int
	col  string
}

// Pushdown decides where each conjunct of where, an expression over the
// rows of a join of type t (its columns named as OutputName names them,
// the relations' columns being schemas and their names aliases), runs; o
// is the SQL settings the WHERE is compiled under (the null test
// evaluates it).
func Pushdown(t Type, where filter.Expr, schemas [2]stream.Schema, aliases [2]string, o filter.Options) Pushed {
	pd := Pushed{Type: t}
	if where == nil {
		return pd
	}
	from := map[string]origin{}
	for side := range schemas {
		for _, f := range schemas[side].Fields {
			if n, ok := OutputName(t, schemas, aliases, side, f.Name); ok {
				from[n] = origin{side, f.Name}
			}
		}
	}
	conj := filter.Conjuncts(where)
	// sideOf is the one side a conjunct reads, -1 for both (Spark's split:
	// no column at all is the left side's).
	sideOf := make([]int, len(conj))
	for i, c := range conj {
		sideOf[i] = readSide(c, from)
	}
	pd.Type = eliminateOuterJoin(t, conj, sideOf, from, schemas, o)
	pushable := [2]bool{}
	switch pd.Type {
	case Inner:
		pushable = [2]bool{true, true}
	case LeftOuter, LeftSemi:
		pushable[stream.LeftSide] = true
	case RightOuter:
		pushable[stream.RightSide] = true
	}
	and := func(acc, c filter.Expr) filter.Expr {
		if acc == nil {
			return c
		}
		return filter.And{L: acc, R: c}
	}
	for i, c := range conj {
		if s := sideOf[i]; s >= 0 && pushable[s] {
			pd.Sides[s] = and(pd.Sides[s], toSide(c, from))
			pd.again = and(pd.again, c)
			continue
		}
		pd.Rest = and(pd.Rest, c)
	}
	return pd
}

// Above is what runs over the join's rows: Rest, and the pushed conjuncts
// once more. Over the rows the pushed sides produce these keep every row
// (the same answer as Spark's), but a checkpoint written before the
// pushdown holds rows they reject, which must not join a new row.
func (p Pushed) Above() filter.Expr {
	switch {
	case p.again == nil:
		return p.Rest
	case p.Rest == nil:
		return p.again
	}
	return filter.And{L: p.Rest, R: p.again}
}

// readSide is the side whose columns alone c reads (the left one for no
// column), -1 when it reads both.
func readSide(c filter.Expr, from map[string]origin) int {
	seen := [2]bool{}
	for _, col := range filter.Columns(c) {
		seen[from[col].side] = true
	}
	switch {
	case seen[0] && seen[1]:
		return -1
	case seen[1]:
		return stream.RightSide
	}
	return stream.LeftSide
}

// toSide renames c's columns from the join's names to the side's.
func toSide(c filter.Expr, from map[string]origin) filter.Expr {
	return expr.Rewrite(c, func(e expr.Expr) (expr.Expr, bool) {
		if col, ok := e.(expr.Col); ok {
			return expr.Col{Name: from[col.Name].col}, true
		}
		return nil, false
	})
}

// eliminateOuterJoin is the type Spark's EliminateOuterJoin makes of an
// outer join t under the conjuncts conj (each reading side sideOf[i]).
func eliminateOuterJoin(t Type, conj []filter.Expr, sideOf []int, from map[string]origin, schemas [2]stream.Schema, o filter.Options) Type {
	if t != LeftOuter && t != RightOuter && t != FullOuter {
		return t
	}
	var rejects [2]bool
	for i, c := range conj {
		// The IsNotNull constraints Spark infers.
		for _, col := range nullIntolerantColumns(c) {
			rejects[from[col].side] = true
		}
		cols := filter.Columns(c)
		for side := range rejects {
			// A conjunct with no column is both sides' (its references are
			// a subset of either's output).
			if rejects[side] || len(cols) > 0 && sideOf[i] != side {
				continue
			}
			rejects[side] = filtersOutNull(toSide(c, from), schemas[side], o)
		}
	}
	l, r := rejects[stream.LeftSide], rejects[stream.RightSide]
	switch {
	case t == RightOuter && l, t == LeftOuter && r, t == FullOuter && l && r:
		return Inner
	case t == FullOuter && l:
		return LeftOuter
	case t == FullOuter && r:
		return RightOuter
	}
	return t
}

// nullIntolerantColumns are the columns reached from e's root through
// null-intolerant expressions only (null in, null out), as Spark's
// scanNullIntolerantAttribute walks a constraint (through the child of an
// IS NOT NULL at the root): the IsNotNull(col) constraints it infers.
// Functions are not walked (fewer inferred constraints, never a wrong one).
func nullIntolerantColumns(e filter.Expr) []string {
	if n, ok := e.(expr.IsNull); ok && n.Neg {
		e = n.X
	}
	var out []string
	var walk func(expr.Expr)
	walk = func(e expr.Expr) {
		switch x := e.(type) {
		case expr.Col:
			out = append(out, x.Name)
		case expr.Cmp:
			walk(x.L)
			walk(x.R)
		case expr.Arith:
			walk(x.L)
			walk(x.R)
		case expr.Neg:
			walk(x.X)
		case expr.Not:
			walk(x.X)
		case expr.Cast:
			if !x.Try {
				walk(x.X)
			}
		case expr.Like:
			walk(x.X)
			walk(x.Pattern)
		}
	}
	walk(e)
	return out
}

// filtersOutNull is Spark's canFilterOutNull: c, over schema's columns,
// is NULL or FALSE on a row whose columns are all null; false when it
// cannot be evaluated.
func filtersOutNull(c filter.Expr, schema stream.Schema, o filter.Options) bool {
	p, err := filter.CompileWith(c, func(name string) (stream.Type, bool) {
		if f := schema.Field(name); f != nil {
			return f.Type, true
		}
		return 0, false
	}, o)
	if err != nil {
		return false
	}
	row := &stream.Batch{Len: 1}
	for _, name := range p.Columns() {
		row.Columns = append(row.Columns, nullColumn(name, schema.Field(name).Type))
	}
	keep, err := p.Keep(row)
	return err == nil && !keep[0]
}

// nullColumn is a column of one null value.
func nullColumn(name string, t stream.Type) stream.Column {
	c := stream.Column{Name: name, Type: t, Valid: []bool{false}}
	switch t.Storage() {
	case stream.Float64:
		c.Float64s = make([]float64, 1)
	case stream.String:
		c.Strings = make([]string, 1)
	case stream.Decimal:
		c.Decimals = make([]stream.Dec128, 1)
	case stream.Array:
		c.Offsets = make([]int32, 2)
		c.Elems = &stream.Column{Type: t.Elem()}
		if t.Elem().Storage() == stream.Array {
			c.Elems.Offsets = []int32{0}
		}
	default:
		c.Int64s = make([]int64, 1)
	}
	return c
}
