package query

import (
	"slices"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/generate"
	"github.com/ethstream/ethstream/stream"
)

// Generators in SELECT: explode, explode_outer, posexplode and
// posexplode_outer of an array (a column or an expression), as Spark's
// analyzer plans them (ExtractGenerator): a query whose SELECT list holds
// one generator and columns becomes, after the read path, the generator
// step (its expression derived first when it is not a column) and a
// projection of the SELECT list, the generator's columns in its place.
// Spark's rules are kept: one generator per SELECT, not nested in an
// expression, only in SELECT. A generator in an aggregating query is
// refused (aggregate over it in a subquery: SELECT t, count(*) FROM
// (SELECT explode(topics) AS t FROM logs) GROUP BY t).

// CodeUnsupportedGenerator is Spark's UNSUPPORTED_GENERATOR (its
// sub-class, MULTI_GENERATOR, NESTED_IN_EXPRESSIONS or OUTSIDE_SELECT, after a dot).
const CodeUnsupportedGenerator = "UNSUPPORTED_GENERATOR"

// generators are the generator functions by name: outer, with position.
var generators = map[string][2]bool{
	"explode": {false, false}, "explode_outer": {true, false},
	"posexplode": {false, true}, "posexplode_outer": {true, true},
}

// genInput names the derived array a generator of an expression reads.
const genInput = "__generator_input"

// generatorOf is the generator call e is, if it is one.
func generatorOf(e filter.Expr) (expr.Call, bool) {
	c, ok := e.(expr.Call)
	if !ok {
		return c, false
	}
	_, gen := generators[c.Name]
	return c, gen
}

// hasGenerator reports whether e calls a generator anywhere.
func hasGenerator(e filter.Expr) bool {
	found := false
	expr.Walk(e, func(n expr.Expr) {
		if _, ok := generatorOf(n); ok {
			found = true
		}
	})
	return found
}

func generatorErr(src string, pos int, sub, remedy, format string, args ...any) error {
	e := errcode.New(CodeUnsupportedGenerator+"."+sub, "", remedy, "the generator is not supported: "+format, args...)
	e.Msg += " (at " + position(src, pos) + ")"
	return e
}

// checkGenerators refuses generators where Spark refuses them, and in an
// aggregating query; it returns whether SELECT holds one.
func (r *resolver) checkGenerators() (bool, error) {
	var gens []string
	pos := 0
	for _, it := range r.sel.Items {
		if it.Expr == nil || !hasGenerator(it.Expr) {
			continue
		}
		c, top := generatorOf(it.Expr)
		if !top {
			return false, generatorErr(r.src, it.Pos, "NESTED_IN_EXPRESSIONS", "select the generator alone and compute over its column in an outer query",
				"nested in expressions %q", it.Expr.String())
		}
		gens = append(gens, `"`+c.String()+`"`)
		if len(gens) == 1 {
			pos = it.Pos
		}
	}
	if len(gens) > 1 {
		return false, generatorErr(r.src, pos, "MULTI_GENERATOR", "explode one array per SELECT; nest the others in subqueries",
			"only one generator allowed per SELECT clause but found %d: %s", len(gens), strings.Join(gens, ", "))
	}
	outside := func(e filter.Expr, where string) error {
		if e != nil && hasGenerator(e) {
			return generatorErr(r.src, r.sel.FromPos, "OUTSIDE_SELECT", "explode in SELECT, and filter or group in an outer query",
				"outside the SELECT clause, found: %s", where)
		}
		return nil
	}
	if err := outside(r.sel.Where, "WHERE"); err != nil {
		return false, err
	}
	if err := outside(r.sel.Having, "HAVING"); err != nil {
		return false, err
	}
	for _, g := range r.sel.GroupBy {
		if err := outside(g.Expr, "GROUP BY"); err != nil {
			return false, err
		}
	}
	if len(gens) == 1 && (len(r.sel.GroupBy) > 0 || r.sel.Distinct || r.sel.Having != nil || r.hasAggregate()) {
		return false, unsupported(r.src, pos, "a generator in an aggregating query (explode in a subquery and aggregate over it: SELECT t, count(*) FROM (SELECT explode(topics) AS t FROM logs) GROUP BY t)")
	}
	return len(gens) == 1, nil
}

// hasAggregate reports whether a SELECT item aggregates.
func (r *resolver) hasAggregate() bool {
	for _, it := range r.sel.Items {
		if it.Agg != "" || it.Window != nil || it.Expr != nil && isAggregate(it.Expr) {
			return true
		}
	}
	return false
}

// rowPlan is what a stateless SELECT computes beyond the columns it reads:
// its expressions (each a derived column named by its alias) and its
// generator, placed among the columns read in SELECT order.
type rowPlan struct {
	derive  []filter.Derived  // SELECT expressions, a generator's array
	gen     *generate.Explode // nil without a generator
	inserts []rowInsert       // the computed output columns
	inputs  []string          // the input columns they read
}

// rowInsert is computed output columns that come before the at-th column
// read (at = len(Select): after all of them).
type rowInsert struct {
	at     int
	fields []stream.Field
}

func (r *resolver) rows() *rowPlan {
	if r.row == nil {
		r.row = &rowPlan{}
	}
	if r.c.Select == nil {
		r.c.Select = []string{} // a stateless query, even with no plain column
	}
	return r.row
}

// selectRowExpr resolves an expression item of a stateless SELECT (no
// aggregate): a derived column named by its alias.
func (r *resolver) selectRowExpr(it Item) error {
	if it.As == "" {
		return invalidQuery(r.src, it.Pos, "name the expression: "+it.Expr.String()+" AS name",
			"the expression %s needs a name (AS): its text is not a valid Delta column name", it.Expr)
	}
	if !validColumnName(it.As) {
		return invalidQuery(r.src, it.Pos, "use an alias of letters, digits and underscores", "output column name %q is not valid in a Delta table", it.As)
	}
	if _, clash := r.colType(strings.ToLower(it.As)); clash || strings.HasPrefix(it.As, "__") {
		return invalidQuery(r.src, it.Pos, "give the expression a name that is not an input column",
			"the expression %s is named %s, an input column", it.Expr, it.As)
	}
	c, err := expr.Compile(it.Expr, r.colType, r.exprOptions())
	if err != nil {
		return err
	}
	if err := r.claim(it.Pos, it.As); err != nil {
		return err
	}
	p := r.rows()
	p.derive = append(p.derive, filter.Derived{Name: it.As, Expr: c})
	p.inputs = append(p.inputs, c.Columns()...)
	p.inserts = append(p.inserts, rowInsert{at: len(r.c.Select), fields: []stream.Field{{Name: it.As, Type: c.Type().Stream(), Nullable: true}}})
	return nil
}

// selectGenerator resolves the generator item it of a stateless SELECT.
func (r *resolver) selectGenerator(it Item) error {
	call, _ := generatorOf(it.Expr)
	if len(call.Args) != 1 {
		return errcode.New("WRONG_NUM_ARGS", "", "pass one array", "the function %s requires 1 parameter but the actual number is %d", call.Name, len(call.Args))
	}
	flags := generators[call.Name]
	g := &generate.Explode{Outer: flags[0]}
	p := r.rows()
	arg := call.Args[0]
	var et stream.Type
	var derive []filter.Derived
	if col, ok := arg.(filter.Col); ok {
		t, ok := r.colType(col.Name)
		if !ok {
			return r.unresolved(it.Pos, col.Name)
		}
		g.Column, et = col.Name, t
		p.inputs = append(p.inputs, col.Name)
	} else {
		c, err := expr.Compile(arg, r.colType, r.exprOptions())
		if err != nil {
			return err
		}
		g.Column, et = genInput, c.Type().Stream()
		p.inputs = append(p.inputs, c.Columns()...)
		derive = []filter.Derived{{Name: genInput, Expr: c}}
	}
	if et.Kind() != stream.Array {
		return errcode.New(expr.CodeDatatypeMismatch, "", "explode an ARRAY (a column such as topics, or split(s, ','))",
			"cannot resolve %s due to data type mismatch: the input of function %s should be an ARRAY, not %s", call, call.Name, strings.ToUpper(et.String()))
	}
	g.As = "col"
	if flags[1] {
		g.PosAs = "pos"
	}
	if it.As != "" {
		if flags[1] {
			return unsupported(r.src, it.Pos, "an alias of "+call.Name+" (its columns are pos and col; rename them in an outer query)")
		}
		if !validColumnName(it.As) {
			return invalidQuery(r.src, it.Pos, "use an alias of letters, digits and underscores", "output column name %q is not valid in a Delta table", it.As)
		}
		g.As = it.As
	}
	ins := rowInsert{at: len(r.c.Select)}
	if g.PosAs != "" {
		if err := r.claim(it.Pos, g.PosAs); err != nil {
			return err
		}
		ins.fields = append(ins.fields, stream.Field{Name: g.PosAs, Type: stream.Int32, Nullable: g.Outer})
	}
	if err := r.claim(it.Pos, g.As); err != nil {
		return err
	}
	ins.fields = append(ins.fields, stream.Field{Name: g.As, Type: et.Elem(), Nullable: true})
	p.derive = append(p.derive, derive...)
	p.gen, p.inserts = g, append(p.inserts, ins)
	return nil
}

// rowSteps are the steps after the read path of a stateless query with
// expressions or a generator (derive, generate, select), and its output
// schema.
func (r *resolver) rowSteps() ([]Step, stream.Schema) {
	p := r.row
	var steps []Step
	if len(p.derive) > 0 {
		steps = append(steps, Step{Derive: p.derive})
	}
	if p.gen != nil {
		steps = append(steps, Step{Generate: p.gen})
	}
	var proj []Column
	var s stream.Schema
	insert := func(at int) {
		for _, in := range p.inserts {
			if in.at == at {
				for _, f := range in.fields {
					proj = append(proj, Column{Name: f.Name})
					s.Fields = append(s.Fields, f)
				}
			}
		}
	}
	n := len(r.outNames) // the columns read that are output; inputs follow
	for i := range n {
		col := r.c.Select[i]
		insert(i)
		c := Column{Name: col}
		if r.outNames[i] != col {
			c.As = r.outNames[i]
		}
		proj = append(proj, c)
		f := stream.Field{Name: r.outNames[i], Type: stream.String}
		for _, in := range r.schema {
			if in.Name == col {
				f.Type, f.Nullable = in.Type, in.Nullable
			}
		}
		s.Fields = append(s.Fields, f)
	}
	insert(n)
	// The read path keeps Select: the expressions' and the generator's
	// inputs too, which the projection then drops.
	for _, in := range p.inputs {
		if !slices.Contains(r.c.Select, in) {
			r.c.Select = append(r.c.Select, in)
		}
	}
	return append(steps, Step{Project: proj}), s
}

// CodeArrayGroupKey refuses an array as a group key (GROUP BY or SELECT
// DISTINCT of an array): the aggregation's state keys hold scalars.
const CodeArrayGroupKey = "UNSUPPORTED_ARRAY_GROUP_KEY"

// arrayKey refuses a group key of an array type.
func (r *resolver) arrayKey(pos int, key string, t stream.Type) error {
	if t.Kind() != stream.Array {
		return nil
	}
	e := errcode.New(CodeArrayGroupKey, "", "group by the array's elements (SELECT e, count(*) FROM (SELECT explode(a) AS e FROM ...) GROUP BY e), by an element (a[0]) or by size(a)",
		"GROUP BY %s: the key is %s, and ethstream groups by scalar values only", key, strings.ToUpper(t.String()))
	e.Msg += " (at " + position(r.src, pos) + ")"
	return e
}
