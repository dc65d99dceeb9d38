package query

import (
	"slices"
	"strconv"
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

// derive compiles e into a derived column named name. An INT expression
// widens to BIGINT and a DATE to its midnight TIMESTAMP, as they did
// before the aggregation held those types, so that the checkpoints and
// tables of such queries restart unchanged (docs/contracts.md, Types);
// BOOLEAN and DECIMAL(p,s) keep their types.
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
	}
	if err != nil {
		return 0, err
	}
	if c.Type().IsArray() && what != "a group key" {
		return 0, invalidQuery(r.src, pos, "aggregate the array's elements (explode in a subquery) or size(a)", "%s is %s: %s", e, c.Type(), what)
	}
	r.c.Derived = append(r.c.Derived, filter.Derived{Name: name, Expr: c})
	r.spec.ColumnTypes[name] = c.Type().Stream()
	return c.Type().Stream(), nil
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
	t, err := r.derive(g.Pos, name, it.Expr, "a group key")
	if err != nil {
		return err
	}
	if err := r.arrayKey(g.Pos, it.Expr.String(), t); err != nil {
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
			missing = unsupported(r.src, it.Pos, "aggregate "+c.Name+"() (count, sum, min, max, avg, count_if, approx_count_distinct are)")
		}
	})
	if missing != nil {
		return missing
	}
	if !isAggregate(it.Expr) {
		name, ok := r.groupExprs[it.Expr.String()]
		if !ok {
			return r.postItem(it)
		}
		r.selected[name] = true
		return r.claim(it.Pos, name)
	}
	call, ok := it.Expr.(expr.Call)
	if !ok || !(aggFuncs[call.Name] || call.Name == "count_if") {
		return r.postItem(it)
	}
	if it.As == "" {
		return invalidQuery(r.src, it.Pos, "name it: "+it.Expr.String()+" AS name",
			"the aggregate %s needs a name (AS): its text is not a valid Delta column name", it.Expr)
	}
	if !validColumnName(it.As) {
		return invalidQuery(r.src, it.Pos, "use an alias of letters, digits and underscores", "output column name %q is not valid in a Delta table", it.As)
	}
	if err := r.claim(it.Pos, it.As); err != nil {
		return err
	}
	return r.addAggregate(call, it.As, it.Pos)
}

// addAggregate adds the aggregate call as the output column name: its
// input (an expression, FILTER, count_if) becomes a derived column.
func (r *resolver) addAggregate(call expr.Call, name string, pos int) error {
	for _, a := range call.Args {
		if isAggregate(a) {
			return invalidQuery(r.src, pos, "aggregate a column or an expression of columns",
				"%s: it is not allowed to use an aggregate function in the argument of another aggregate function", call)
		}
	}
	kind := call.Name
	var input filter.Expr
	var rsd float64
	switch {
	case kind == "approx_count_distinct" && len(call.Args) == 2:
		var err error
		if rsd, err = r.relativeSD(pos, call); err != nil {
			return err
		}
		input = call.Args[0]
	case kind == "count_if":
		if len(call.Args) != 1 {
			return invalidQuery(r.src, pos, "pass one condition", "count_if takes one argument, %d given", len(call.Args))
		}
		kind, input = "count", expr.Case{Whens: []expr.When{{Cond: call.Args[0], Then: filter.Lit{Kind: filter.LitInt, Int: 1}}}}
	case call.Star:
		input = filter.Lit{Kind: filter.LitInt, Int: 1}
	case len(call.Args) != 1:
		return invalidQuery(r.src, pos, "pass one argument", "%s takes one argument, %d given", kind, len(call.Args))
	default:
		input = call.Args[0]
	}
	if call.Filter != nil {
		if isAggregate(call.Filter) {
			return invalidQuery(r.src, pos, "filter on columns", "%s: FILTER (WHERE ...) holds an aggregate", call)
		}
		input = expr.Case{Whens: []expr.When{{Cond: call.Filter, Then: input}}}
	}
	a := agg.Aggregate{Kind: aggKinds[kind], As: name, RelativeSD: rsd}
	r.aggByText[call.String()] = name
	if c, ok := input.(filter.Col); ok && call.Filter == nil {
		// A plain column, as the column form of the aggregate.
		t, ok := r.colType(c.Name)
		if !ok {
			return r.unresolved(pos, c.Name)
		}
		a.Column = c.Name
		r.spec.ColumnTypes[c.Name] = t
		if err := r.checkInput(pos, call, kind, t); err != nil {
			return err
		}
		r.spec.Aggregates = append(r.spec.Aggregates, a)
		return nil
	}
	if call.Star && call.Filter == nil {
		r.spec.Aggregates = append(r.spec.Aggregates, a)
		return nil
	}
	if kind == "count" {
		// count counts non-null values: of any type, as a BIGINT 1.
		input = expr.Case{Whens: []expr.When{{Cond: expr.IsNull{X: input, Neg: true}, Then: filter.Lit{Kind: filter.LitInt, Int: 1}}}}
	}
	a.Column = "__in_" + strings.ToLower(name)
	t, err := r.derive(pos, a.Column, input, "an aggregate's input")
	if err != nil {
		return err
	}
	if err := r.checkInput(pos, call, kind, t); err != nil {
		return err
	}
	r.spec.Aggregates = append(r.spec.Aggregates, a)
	return nil
}

func (r *resolver) checkInput(pos int, call expr.Call, kind string, t stream.Type) error {
	switch {
	case kind != "count" && kind != "approx_count_distinct" && t == stream.String:
		return invalidQuery(r.src, pos, "aggregate a numeric expression", "%s: the input is a string", call)
	case t == stream.Timestamp && (kind == "sum" || kind == "avg"):
		return invalidQuery(r.src, pos, "use min or max of a timestamp", "%s: the input is a timestamp", call)
	}
	return nil
}

// postItem is a SELECT expression computed over the aggregation's output:
// its aggregates become (hidden, unless selected as they are) aggregate
// columns, its columns must be group keys.
type postItem struct {
	name string
	e    filter.Expr
	pos  int
}

func (r *resolver) postItem(it Item) error {
	if it.As == "" {
		return invalidQuery(r.src, it.Pos, "name it: "+it.Expr.String()+" AS name",
			"the expression %s needs a name (AS): its text is not a valid Delta column name", it.Expr)
	}
	if !validColumnName(it.As) {
		return invalidQuery(r.src, it.Pos, "use an alias of letters, digits and underscores", "output column name %q is not valid in a Delta table", it.As)
	}
	if err := r.claim(it.Pos, it.As); err != nil {
		return err
	}
	e, err := r.hideAggregates(it.Expr, it.Pos)
	if err != nil {
		return err
	}
	r.postSrc = append(r.postSrc, postItem{name: it.As, e: e, pos: it.Pos})
	return nil
}

// hideAggregates replaces each aggregate call in e by its output column:
// one selected as it is, or a hidden aggregate added for it.
func (r *resolver) hideAggregates(e filter.Expr, pos int) (filter.Expr, error) {
	var failed error
	out := expr.Rewrite(e, func(n expr.Expr) (expr.Expr, bool) {
		c, ok := n.(expr.Call)
		if !ok || !(aggFuncs[c.Name] || c.Name == "count_if") || failed != nil {
			return nil, false
		}
		if name, ok := r.aggByText[c.String()]; ok {
			return filter.Col{Name: name, Display: c.String()}, true
		}
		name := "__agg_" + strconv.Itoa(len(r.hidden))
		r.hidden = append(r.hidden, name)
		if err := r.addAggregate(c, name, pos); err != nil {
			failed = err
			return nil, false
		}
		return filter.Col{Name: name, Display: c.String()}, true
	})
	return out, failed
}

// post compiles HAVING and the expressions over aggregates against the
// aggregation's output columns.
func (r *resolver) post() error {
	var having filter.Expr
	if r.sel.Having != nil {
		var err error
		if having, err = r.hideAggregates(r.sel.Having, 0); err != nil {
			return err
		}
	}
	if having == nil && len(r.postSrc) == 0 && len(r.hidden) == 0 {
		return nil
	}
	schema, err := r.outputSchema()
	if err != nil {
		return err
	}
	out := func(name string) (stream.Type, bool) {
		if f := schema.Field(name); f != nil {
			return f.Type, true
		}
		return 0, false
	}
	check := func(e filter.Expr, pos int) error {
		for _, c := range expr.Columns(e) {
			if _, ok := out(c); !ok {
				return invalidQuery(r.src, pos, "group by "+c+" or aggregate it", "%s is neither in GROUP BY nor aggregated", c)
			}
		}
		return nil
	}
	p := &filter.Post{Drop: r.hidden}
	if having != nil {
		if err := check(having, 0); err != nil {
			return err
		}
		c, err := expr.Compile(having, out, r.exprOptions())
		if err != nil {
			return err
		}
		if c.Type() != expr.Boolean && c.Type() != expr.Null {
			return invalidQuery(r.src, 0, "write a condition", "HAVING %s is %s, not a condition", r.sel.Having, c.Type())
		}
		p.Having = c
	}
	for _, it := range r.postSrc {
		if err := check(it.e, it.pos); err != nil {
			return err
		}
		c, err := expr.Compile(it.e, out, r.exprOptions())
		if err != nil {
			return err
		}
		switch c.Type() {
		case expr.Int, expr.Null:
			c, err = expr.Compile(expr.Cast{X: it.e, To: expr.BigInt}, out, r.exprOptions())
		case expr.Date:
			c, err = expr.Compile(expr.Cast{X: it.e, To: expr.Timestamp}, out, r.exprOptions())
		}
		if err != nil {
			return err
		}
		p.Columns = append(p.Columns, filter.Derived{Name: it.name, Expr: c})
	}
	r.c.Post = p
	return nil
}

// unsupportedAggs are Spark aggregates ethstream does not run, named in
// errors rather than reported as unknown functions.
var unsupportedAggs = map[string]bool{"count_distinct": true, "first": true, "last": true,
	"collect_list": true, "collect_set": true, "stddev": true, "stddev_pop": true, "stddev_samp": true, "variance": true,
	"var_pop": true, "var_samp": true, "percentile": true, "percentile_approx": true, "any_value": true, "max_by": true,
	"min_by": true, "bool_and": true, "bool_or": true, "every": true, "any": true, "some": true}

// windowedDerive makes a windowed query's derived columns null, unevaluated,
// for a row without an event time: Spark's window() drops such a row
// before the aggregation evaluates its grouping and input expressions, so
// an error they would raise for it is never raised. A session window's
// dynamic gap also leaves a row without a session when it is null,
// malformed or not positive, which no expression can tell: the columns
// but the gap are Guarded, computed only for the rows the session
// operator aggregates (filter.RowGuard), as Spark's SessionWindowing
// filters the others before the aggregation.
func (r *resolver) windowedDerive() error {
	if r.window == nil {
		return nil
	}
	for i, d := range r.c.Derived {
		if r.session != nil && r.session.GapColumn != "" && d.Name != r.session.GapColumn {
			r.c.Derived[i].Guarded = true
		}
		guarded := expr.Case{Whens: []expr.When{{Cond: expr.IsNull{X: filter.Col{Name: r.window.Col}, Neg: true}, Then: d.Expr.Source()}}}
		c, err := expr.Compile(guarded, r.colType, r.exprOptions())
		if err != nil {
			return err
		}
		r.c.Derived[i].Expr = c
	}
	return nil
}
