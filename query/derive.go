package query

import (
	"slices"
	"strings"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

// Expressions a query groups by or aggregates are computed before the
// aggregation, as Spark's planner projects them below the Aggregate: each
// becomes a derived column (Compiled.Derived) that filter.Operator appends
// to the rows the WHERE kept. A group expression's column is named by its
// SELECT alias; an aggregate's input by "__in_" and the aggregate's alias.

// isAggregate reports whether e calls an aggregate function anywhere.
func isAggregate(e filter.Expr) bool {
	found := false
	expr.Walk(e, func(n expr.Expr) {
		if c, ok := n.(expr.Call); ok && (aggFuncs[c.Name] || c.Name == "count_if") {
			found = true
		}
	})
	return found
}

// exprOptions are the expression settings of the query.
func (r *resolver) exprOptions() expr.Options { return expr.Options{NonANSI: r.o.NonANSI} }

// derive compiles e into a derived column named name, cast to a type the
// aggregation holds (INT widens to BIGINT, DATE to its midnight
// TIMESTAMP); BOOLEAN and DECIMAL are refused with a remedy, for the
// aggregation's state does not hold them yet.
func (r *resolver) derive(pos int, name string, e filter.Expr, what string) (stream.Type, error) {
	c, err := expr.Compile(e, r.colType, r.exprOptions())
	if err != nil {
		return 0, err
	}
	switch c.Type() {
	case expr.Int, expr.Null:
		c, err = expr.Compile(expr.Cast{X: e, To: expr.BigInt}, r.colType, r.exprOptions())
	case expr.Date:
		c, err = expr.Compile(expr.Cast{X: e, To: expr.Timestamp}, r.colType, r.exprOptions())
	case expr.Boolean:
		return 0, unsupported(r.src, pos, what+" of type BOOLEAN (cast it: CAST(... AS INT) or AS STRING)")
	}
	if err != nil {
		return 0, err
	}
	if c.Type().Kind == stream.Decimal {
		return 0, unsupported(r.src, pos, what+" of type "+c.Type().String()+" (the aggregation holds no DECIMAL yet: CAST(... AS DOUBLE) or AS STRING)")
	}
	r.c.Derived = append(r.c.Derived, filter.Derived{Name: name, Expr: c})
	r.spec.ColumnTypes[name] = c.Type().Kind
	return c.Type().Kind, nil
}

// groupExprItem finds the SELECT item a GROUP BY expression names: the
// same expression (by its canonical text), or the item an alias or an
// ordinal names.
func (r *resolver) groupExprItem(g GroupItem) *Item {
	for i := range r.sel.Items {
		it := &r.sel.Items[i]
		if it.Expr == nil {
			continue
		}
		switch {
		case g.Expr != nil && it.Expr.String() == g.Expr.String():
			return it
		case g.Ordinal == i+1:
			return it
		case g.Col != "" && !r.o.NoGroupByAliases && it.As != "" && strings.EqualFold(it.As, g.Col):
			if _, isCol := r.colType(g.Col); !isCol {
				return it
			}
		}
	}
	return nil
}

// groupExpr resolves a GROUP BY expression: a derived column named by its
// SELECT item's alias.
func (r *resolver) groupExpr(g GroupItem, it *Item) error {
	if it == nil {
		return invalidQuery(r.src, g.Pos, "select the expression too, with a name: SELECT "+g.String()+" AS name",
			"GROUP BY %s but the expression is not selected: the table could not tell its groups apart", g)
	}
	if isAggregate(it.Expr) {
		return invalidQuery(r.src, g.Pos, "group by columns or window(...), and aggregate in SELECT",
			"GROUP BY %s refers to an expression %s that contains an aggregate function. Aggregate functions are not allowed in GROUP BY", g, it.String())
	}
	if it.As == "" {
		return invalidQuery(r.src, it.Pos, "name the expression: "+it.Expr.String()+" AS name",
			"the group expression %s needs a name (AS): its text is not a valid Delta column name", it.Expr)
	}
	name := it.As
	if slices.Contains(r.spec.GroupBy, name) {
		return invalidQuery(r.src, g.Pos, "name each group key once", "GROUP BY %s appears twice", g)
	}
	if _, clash := r.colType(strings.ToLower(name)); clash {
		return invalidQuery(r.src, it.Pos, "give the expression a name that is not an input column",
			"the group expression %s is named %s, an input column", it.Expr, name)
	}
	if _, err := r.derive(g.Pos, name, it.Expr, "a group key"); err != nil {
		return err
	}
	r.spec.GroupBy = append(r.spec.GroupBy, name)
	r.groupExprs[it.Expr.String()] = name
	return nil
}

// selectExpr resolves a SELECT item that is an expression: a group
// expression, or one aggregate (of an expression, with FILTER, or
// count_if).
func (r *resolver) selectExpr(it Item) error {
	var missing error
	expr.Walk(it.Expr, func(n expr.Expr) {
		if c, ok := n.(expr.Call); ok && missing == nil && unsupportedAggs[c.Name] {
			missing = unsupported(r.src, it.Pos, "aggregate "+c.Name+"() (count, sum, min, max, avg, count_if are)")
		}
	})
	if missing != nil {
		return missing
	}
	if !isAggregate(it.Expr) {
		name, ok := r.groupExprs[it.Expr.String()]
		if !ok {
			return invalidQuery(r.src, it.Pos, "group by the expression (GROUP BY "+it.Expr.String()+") or aggregate it",
				"%s is neither in GROUP BY nor aggregated", it.Expr)
		}
		r.selected[name] = true
		return r.claim(it.Pos, name)
	}
	call, ok := it.Expr.(expr.Call)
	if !ok || !(aggFuncs[call.Name] || call.Name == "count_if") {
		return unsupported(r.src, it.Pos, "an expression over aggregates ("+it.Expr.String()+"); aggregate the expression instead, e.g. sum(x / 2) for sum(x) / 2")
	}
	for _, a := range call.Args {
		if isAggregate(a) {
			return invalidQuery(r.src, it.Pos, "aggregate a column or an expression of columns",
				"%s: it is not allowed to use an aggregate function in the argument of another aggregate function", it.Expr)
		}
	}
	kind := call.Name
	var input filter.Expr
	switch {
	case kind == "count_if":
		if len(call.Args) != 1 {
			return invalidQuery(r.src, it.Pos, "pass one condition", "count_if takes one argument, %d given", len(call.Args))
		}
		kind, input = "count", expr.Case{Whens: []expr.When{{Cond: call.Args[0], Then: filter.Lit{Kind: filter.LitInt, Int: 1}}}}
	case call.Star:
		input = filter.Lit{Kind: filter.LitInt, Int: 1}
	case len(call.Args) != 1:
		return invalidQuery(r.src, it.Pos, "pass one argument", "%s takes one argument, %d given", kind, len(call.Args))
	default:
		input = call.Args[0]
	}
	if call.Filter != nil {
		if isAggregate(call.Filter) {
			return invalidQuery(r.src, it.Pos, "filter on columns", "%s: FILTER (WHERE ...) holds an aggregate", it.Expr)
		}
		input = expr.Case{Whens: []expr.When{{Cond: call.Filter, Then: input}}}
	}
	if kind == "count" {
		// count counts non-null values: of any type, as a BIGINT 1.
		input = expr.Case{Whens: []expr.When{{Cond: expr.IsNull{X: input, Neg: true}, Then: filter.Lit{Kind: filter.LitInt, Int: 1}}}}
	}
	if it.As == "" {
		return invalidQuery(r.src, it.Pos, "name it: "+it.Expr.String()+" AS name",
			"the aggregate %s needs a name (AS): its text is not a valid Delta column name", it.Expr)
	}
	name := "__in_" + strings.ToLower(it.As)
	t, err := r.derive(it.Pos, name, input, "an aggregate's input")
	if err != nil {
		return err
	}
	a := agg.Aggregate{Kind: aggKinds[kind], Column: name, As: it.As}
	switch {
	case kind != "count" && t == stream.String && kind != "min" && kind != "max":
		return invalidQuery(r.src, it.Pos, "aggregate a numeric expression", "%s: the input is a string", it.Expr)
	case t == stream.Timestamp && (a.Kind == agg.Sum || a.Kind == agg.Avg):
		return invalidQuery(r.src, it.Pos, "use min or max of a timestamp", "%s: the input is a timestamp", it.Expr)
	}
	if !validColumnName(it.As) {
		return invalidQuery(r.src, it.Pos, "use an alias of letters, digits and underscores", "output column name %q is not valid in a Delta table", it.As)
	}
	if err := r.claim(it.Pos, it.As); err != nil {
		return err
	}
	r.spec.Aggregates = append(r.spec.Aggregates, a)
	return nil
}

// unsupportedAggs are Spark aggregates ethstream does not run, named in
// errors rather than reported as unknown functions.
var unsupportedAggs = map[string]bool{"approx_count_distinct": true, "count_distinct": true, "first": true, "last": true,
	"collect_list": true, "collect_set": true, "stddev": true, "stddev_pop": true, "stddev_samp": true, "variance": true,
	"var_pop": true, "var_samp": true, "percentile": true, "percentile_approx": true, "any_value": true, "max_by": true,
	"min_by": true, "bool_and": true, "bool_or": true, "every": true, "any": true, "some": true}

// windowedDerive makes a windowed query's derived columns null, unevaluated,
// for a row without an event time: Spark's window() drops such a row
// before the aggregation evaluates its grouping and input expressions, so
// an error they would raise for it is never raised.
func (r *resolver) windowedDerive() error {
	if r.window == nil {
		return nil
	}
	for i, d := range r.c.Derived {
		guarded := expr.Case{Whens: []expr.When{{Cond: expr.IsNull{X: filter.Col{Name: r.window.Col}, Neg: true}, Then: d.Expr.Source()}}}
		c, err := expr.Compile(guarded, r.colType, r.exprOptions())
		if err != nil {
			return err
		}
		r.c.Derived[i].Expr = c
	}
	return nil
}
