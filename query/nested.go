package query

import (
	"slices"
	"strings"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

// A query over a subquery (FROM (SELECT ...)) is the subquery's plan
// followed by the query's own steps: its WHERE becomes a filter step, its
// aggregation the next stateful operator (Spark 3.4+ runs several in
// append mode), its SELECT a projection. The read path (sources, columns
// read, watermark, the WHERE over the rows read) is the innermost query's.
// A UNION ALL of SELECTs over named sources is one read of all of them:
// each branch's WHERE keeps the rows of its own sources (a CASE on the
// literal source column), and the branches' columns must line up by
// position and name, since one projection reads every source.

// Spark's messages for the shapes its UnsupportedOperationChecker refuses.
const (
	msgSort       = "Sorting is not supported on streaming DataFrames/Datasets, unless it is on aggregated DataFrame/Dataset in Complete output mode"
	msgLimit      = "Limits are not supported on streaming DataFrames/Datasets in Update output mode"
	msgMultiAggs  = "Multiple streaming aggregations are not supported with streaming DataFrames/Datasets"
	ColWindowTime = "window_time"
)

// Spark's error classes of a UNION whose branches do not line up.
const (
	CodeNumColumnsMismatch    = "NUM_COLUMNS_MISMATCH"
	CodeIncompatibleColumnTyp = "INCOMPATIBLE_COLUMN_TYPE"
)

// input is what a query over a subquery reads.
type input struct {
	c      *Compiled
	schema []stream.Field
	// stateful is set when the subquery's plan has a stateful operator;
	// windowed when its rows carry an aggregation's window.
	stateful, windowed bool
}

// compileFrom compiles the subquery sel reads: one SELECT, or a UNION ALL.
func compileFrom(src string, sel *Select, o Options) (*input, error) {
	var c *Compiled
	var err error
	if len(sel.Sub) > 1 {
		c, err = compileUnion(src, sel, o)
	} else {
		c, err = compileSelect(src, sel.Sub[0], o, false)
	}
	if err != nil {
		return nil, err
	}
	in := &input{c: c, schema: c.Schema.Fields, stateful: c.Stateful()}
	in.windowed = c.Schema.Field(agg.ColWindowStart) != nil && c.Schema.Field(agg.ColWindowEnd) != nil
	return in, nil
}

// windowed reports whether the query reads a subquery's windowed rows.
func (r *resolver) windowed() bool { return r.in != nil && r.in.windowed }

// star expands SELECT * into the relation's columns: a view over several
// sources has the source column too (it is one of its columns in Spark).
func (r *resolver) star() error {
	if !r.sel.Star {
		return nil
	}
	cp := *r.sel
	cp.Items = nil
	for _, f := range r.schema {
		cp.Items = append(cp.Items, Item{Col: f.Name, Pos: r.sel.FromPos})
	}
	if r.in == nil && r.view() {
		cp.Items = append(cp.Items, Item{Col: stream.ColSource, Pos: r.sel.FromPos})
	}
	r.sel = &cp
	return nil
}

// view reports whether FROM reads a view (a name other than its one
// source's): its rows have the literal source column.
func (r *resolver) view() bool {
	return len(r.c.Sources) != 1 || r.c.Sources[0] >= len(r.o.Sources) || !strings.EqualFold(r.o.Sources[r.c.Sources[0]], r.c.From)
}

// distinct plans SELECT DISTINCT as Spark's ReplaceDistinctWithAggregate
// does: an aggregation whose keys are the selected columns, with no
// aggregate of its own (selectList adds the row count agg keeps, dropped
// from the output).
func (r *resolver) distinct() error {
	if !r.sel.Distinct {
		return nil
	}
	if len(r.sel.GroupBy) > 0 || r.sel.Having != nil {
		return unsupported(r.src, r.sel.FromPos, "SELECT DISTINCT with GROUP BY (aggregate in a subquery: SELECT DISTINCT ... FROM (SELECT ... GROUP BY ...))")
	}
	cp := *r.sel
	cp.GroupBy = nil
	for _, it := range cp.Items {
		g := GroupItem{Pos: it.Pos}
		switch {
		case it.Agg != "" || it.Expr != nil && isAggregate(it.Expr):
			return unsupported(r.src, it.Pos, "SELECT DISTINCT over an aggregate")
		case it.Window != nil:
			g.Window = it.Window
		case it.Expr != nil:
			g.Expr = it.Expr
		default:
			g.Col = it.Col
		}
		cp.GroupBy = append(cp.GroupBy, g)
	}
	r.sel = &cp
	return nil
}

// nestedWatermark applies withWatermark(col) to a query over a subquery:
// the read path has it; the query's aggregation closes its windows by it,
// over the event time the subquery passes on (the column itself, or the
// time of its windows, window_time(window)).
func (r *resolver) nestedWatermark(col string) error {
	if r.c.Select != nil {
		return nil
	}
	if w := r.window; w != nil {
		if !w.OfWindow && w.Col != col && !r.aliasOf(col, w.Col) {
			return errcode.New(CodeUnsupported, "", "set the watermark on the window's event-time column",
				"withWatermark(%s): ethstream evicts state by the window's event time; a watermark on another column is not supported", col)
		}
		r.spec.WatermarkDelay, r.spec.HasWatermark = r.o.WatermarkDelay, true
		return nil
	}
	if t, ok := r.colType(col); ok && t == stream.Timestamp {
		r.spec.WatermarkColumn, r.spec.WatermarkDelay, r.spec.HasWatermark = col, r.o.WatermarkDelay, true
		r.spec.ColumnTypes[col] = t
	}
	return nil
}

// plan sets the query's steps and the schema of its rows, over a subquery
// the subquery's steps first and its read path.
func (r *resolver) plan() error {
	stateful := r.c.Select == nil
	var steps []Step
	if r.in != nil {
		steps = append(steps, r.in.c.Steps...)
		if r.window != nil && r.window.OfWindow {
			if !r.windowed() || !r.in.stateful {
				return invalidQuery(r.src, r.window.Pos, "window the subquery's aggregation: GROUP BY window(block_ts, '5 minutes') in the subquery",
					"window_time(window): the subquery has no window aggregation (window_time reads the window an aggregation emits)")
			}
			if slices.ContainsFunc(r.schema, func(f stream.Field) bool { return f.Name == ColWindowTime }) {
				return invalidQuery(r.src, r.window.Pos, "rename the subquery's column window_time", "window_time(window): the subquery already has a column window_time")
			}
			// window_time(window) is a column of the rows, beside the
			// window's bounds.
			proj := make([]Column, 0, len(r.schema)+1)
			for _, f := range r.schema {
				proj = append(proj, Column{Name: f.Name})
			}
			steps = append(steps, Step{Project: append(proj, Column{Name: agg.ColWindowEnd, As: ColWindowTime, WindowTime: true})})
		}
		if r.where2 != nil {
			steps = append(steps, Step{Where: r.where2})
		}
	}
	if stateful {
		if r.in != nil && r.in.stateful && r.spec.Mode != agg.Append {
			return errcode.New(agg.CodeUnsupportedOutputMode, "", "run the query with --output-mode append (each window of the subquery reaches the query once, when the watermark closes it)",
				"%s in %s output mode: an aggregation over a subquery's aggregation runs in append mode only (Spark 3.4+)", msgMultiAggs, r.spec.Mode)
		}
		out, err := r.outputSchema()
		if err != nil {
			return err
		}
		steps = append(steps, Step{Aggregate: &Aggregation{Spec: r.spec, Derived: r.c.Derived, Post: r.c.Post, Session: r.session}})
		r.c.Schema = out
		if r.c.Post != nil {
			r.c.Schema = r.c.Post.Schema(r.c.Schema)
		}
	} else if r.row != nil {
		gs, s := r.rowSteps()
		steps = append(steps, gs...)
		r.c.Schema = s
	} else {
		var proj []Column
		s := stream.Schema{}
		for i, col := range r.c.Select {
			t, nullable := stream.String, false
			for _, f := range r.schema {
				if f.Name == col {
					t, nullable = f.Type, f.Nullable
				}
			}
			name := r.outNames[i]
			proj = append(proj, Column{Name: col, As: name})
			if name == col {
				proj[i].As = ""
			}
			s.Fields = append(s.Fields, stream.Field{Name: name, Type: t, Nullable: nullable})
		}
		if r.in != nil || r.rename || !r.top {
			steps = append(steps, Step{Project: proj})
		}
		r.c.Schema = s
	}
	r.c.Steps = steps
	if r.in != nil {
		in := r.in.c
		r.c.Sources, r.c.From, r.c.Columns, r.c.Where, r.c.PreWatermark = in.Sources, in.From, in.Columns, in.Where, in.PreWatermark
		r.c.WatermarkColumn, r.c.WatermarkDelay = in.WatermarkColumn, in.WatermarkDelay
		r.c.Select = nil
		if !r.c.Stateful() {
			r.c.Select = in.Select
		}
		if in.Stateful() {
			// Spec, Derived and Post are the first aggregation's.
			r.c.Spec, r.c.Derived, r.c.Post = in.Spec, in.Derived, in.Post
		}
	}
	return nil
}

// orderLimit adds ORDER BY and LIMIT, over what the sink receives each
// batch, where Spark allows them on a stream: a sort over an aggregation
// in complete mode; a limit in complete mode. Append mode's limit, which
// Spark keeps across batches in state (StreamingGlobalLimitExec), is a
// stateful step of its own (Step.GlobalLimit).
func (r *resolver) orderLimit() error {
	sel := r.sel
	if len(sel.OrderBy) == 0 && sel.Limit == nil {
		return nil
	}
	mode := r.spec.Mode
	complete := r.c.Stateful() && mode == agg.Complete
	if len(sel.OrderBy) > 0 {
		if !complete {
			e := errcode.New(CodeUnsupported, "", "aggregate, and run with --output-mode complete; or sort when reading the table", "%s", msgSort)
			e.Msg += " (at " + position(r.src, sel.OrderPos) + ")"
			return e
		}
		var keys []SortKey
		for _, o := range sel.OrderBy {
			cols, err := r.orderColumns(o)
			if err != nil {
				return err
			}
			for _, c := range cols {
				keys = append(keys, SortKey{Column: c, Desc: o.Desc, NullsFirst: o.NullsFirst})
			}
		}
		r.c.Steps = append(r.c.Steps, Step{Sort: keys})
	}
	if sel.Limit != nil {
		switch {
		case mode == agg.Update && r.c.Stateful() || mode == 0:
			e := errcode.New(CodeUnsupported, "", "run with --output-mode complete, or leave LIMIT out", "%s", msgLimit)
			e.Msg += " (at " + position(r.src, sel.LimitPos) + ")"
			return e
		case !complete:
			// Append mode: the first n rows of the stream, counted in
			// state (Spark's StreamingGlobalLimitExec).
			n := *sel.Limit
			r.c.Steps = append(r.c.Steps, Step{GlobalLimit: &n})
			return nil
		}
		n := *sel.Limit
		r.c.Steps = append(r.c.Steps, Step{Limit: &n})
	}
	return nil
}

// orderColumns are the output columns an ORDER BY key names: a column of
// the rows the sink receives (window is its two bounds), or a SELECT
// position.
func (r *resolver) orderColumns(o OrderItem) ([]string, error) {
	name := o.Col
	if o.Ordinal > 0 {
		if o.Ordinal > len(r.sel.Items) {
			return nil, invalidQuery(r.src, o.Pos, "use a position of the SELECT list",
				"ORDER BY position %d is not in select list (valid range is [1, %d])", o.Ordinal, len(r.sel.Items))
		}
		it := r.sel.Items[o.Ordinal-1]
		switch {
		case it.As != "":
			name = it.As
		case it.Window != nil:
			name = "window"
		case it.Agg != "" && it.AggCol == "":
			name = "count"
		case it.Agg != "":
			name = it.Agg + "_" + it.AggCol
		default:
			name = it.Col
		}
	}
	if strings.EqualFold(name, "window") && r.c.Schema.Field(agg.ColWindowStart) != nil {
		return []string{agg.ColWindowStart, agg.ColWindowEnd}, nil
	}
	var names []string
	for _, f := range r.c.Schema.Fields {
		if strings.EqualFold(f.Name, name) && !strings.HasPrefix(f.Name, "__") {
			return []string{f.Name}, nil
		}
		if !strings.HasPrefix(f.Name, "__") {
			names = append(names, f.Name)
		}
	}
	e := errcode.New(CodeUnresolvedColumn, "", "order by one of the output columns: "+strings.Join(names, ", "),
		"ORDER BY %s: the query's output has no column %q", o, name)
	e.Msg += " (at " + position(r.src, o.Pos) + ")"
	return nil, e
}

// compileUnion compiles FROM (SELECT ... UNION ALL SELECT ...): every
// branch a SELECT of columns (or *) of a relation, maybe with a WHERE.
// Spark's UNION ALL resolves by position; ethstream reads every source
// through one projection, so the branches must select the same columns in
// the same order (by name and type), and read each source once.
func compileUnion(src string, sel *Select, o Options) (*Compiled, error) {
	var branches []*Compiled
	owner := map[int]int{}
	for i, b := range sel.Sub {
		if b.Sub != nil {
			return nil, unsupported(src, b.FromPos, "a subquery in a UNION ALL branch (each branch reads a source or a view)")
		}
		if len(b.GroupBy) > 0 || b.Having != nil || b.Distinct || len(b.Items) > 0 && !plainColumns(b.Items) {
			return nil, unsupported(src, b.FromPos, "a UNION ALL branch other than SELECT columns FROM a source [WHERE ...] (aggregate over the union: SELECT ... FROM (... UNION ALL ...) GROUP BY ...)")
		}
		bo := o
		bo.OutputMode, bo.WatermarkColumn = "append", ""
		c, err := compileSelect(src, b, bo, false)
		if err != nil {
			return nil, err
		}
		for _, s := range c.Sources {
			if j, dup := owner[s]; dup {
				return nil, invalidQuery(src, b.FromPos, "read each source in one branch",
					"source %s is read by branches %d and %d of the UNION ALL: a source is read once per query", o.Sources[s], j+1, i+1)
			}
			owner[s] = i
		}
		branches = append(branches, c)
	}
	first := branches[0]
	for k, c := range branches[1:] {
		if len(c.Select) != len(first.Select) {
			return nil, errcode.New(CodeNumColumnsMismatch, "", "select the same columns in every branch",
				"UNION can only be performed on inputs with the same number of columns, but the first input has %d columns and the %s input has %d columns",
				len(first.Select), ordinalWord(k+2), len(c.Select))
		}
		for i, col := range c.Select {
			ft, ct := first.Schema.Fields[i].Type, c.Schema.Fields[i].Type
			if ft != ct {
				return nil, errcode.New(CodeIncompatibleColumnTyp, "", "cast the column to one type in every branch",
					"UNION can only be performed on inputs with compatible column types. Column %d of the %s input is %s, which is not compatible with %s at the same column of the first input",
					i+1, ordinalWord(k+2), ct, ft)
			}
			if col != first.Select[i] {
				return nil, unsupported(src, sel.Sub[k+1].FromPos, "a UNION ALL whose branches select different columns at one position (Spark unions by position: column "+
					strings.Join([]string{first.Select[i], col}, " against ")+"; ethstream reads every source through one projection: select the same columns in the same order)")
			}
		}
	}
	u := &Compiled{From: strings.Join(fromNames(branches), " union all "), Select: first.Select, Steps: first.Steps, Schema: first.Schema}
	var cases []expr.When
	filtered := false
	for i, c := range branches {
		u.Sources = append(u.Sources, c.Sources...)
		for _, col := range c.Columns {
			if !slices.Contains(u.Columns, col) {
				u.Columns = append(u.Columns, col)
			}
		}
		var names []filter.Lit
		for _, s := range c.Sources {
			names = append(names, filter.Lit{Kind: filter.LitString, Str: o.Sources[s]})
		}
		var then filter.Expr = filter.Lit{Kind: filter.LitBool, Bool: true}
		if w := sel.Sub[i].Where; w != nil {
			then, filtered = w, true
		}
		cases = append(cases, expr.When{Cond: filter.In{X: filter.Col{Name: stream.ColSource}, List: names}, Then: then})
	}
	ur := &resolver{src: src, o: o, c: u}
	ur.schema = ur.relationSchema(u.Sources)
	if filtered {
		// Each branch's WHERE keeps the rows of its own sources: the CASE
		// evaluates only the branch of a row's source.
		where := expr.Case{Whens: cases, Else: filter.Lit{Kind: filter.LitBool, Bool: false}}
		p, err := filter.CompileWith(where, ur.colType, filter.Options{NonANSI: o.NonANSI})
		if err != nil {
			return nil, err
		}
		u.Where = p
		if !slices.Contains(u.Columns, stream.ColSource) {
			u.Columns = append(u.Columns, stream.ColSource)
		}
	}
	if col := o.WatermarkColumn; col != "" {
		// withWatermark over the union: every row its branches keep
		// advances the event time (their filters are below it).
		if first.Schema.Field(col) == nil {
			return nil, errcode.New(CodeUnresolvedColumn, "", "select the event-time column in every branch of the UNION ALL",
				"withWatermark(%s): the UNION ALL does not select column %q", col, col)
		}
		if t := first.Schema.Field(col).Type; t != stream.Timestamp {
			return nil, errcode.New(CodeUnsupported, "", "set the watermark on a timestamp column such as block_ts",
				"withWatermark(%s): the event time %s has the invalid type %s, but expected \"TIMESTAMP\"", col, col, t)
		}
		u.WatermarkColumn, u.WatermarkDelay = col, o.WatermarkDelay
		u.PreWatermark = u.Where
	}
	return u, nil
}

// plainColumns reports whether every item is a column (maybe renamed).
func plainColumns(items []Item) bool {
	for _, it := range items {
		if it.Col == "" || it.Window != nil {
			return false
		}
	}
	return true
}

func fromNames(cs []*Compiled) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.From
	}
	return out
}

// ordinalWord names an input of a UNION as Spark's messages do.
func ordinalWord(n int) string {
	words := []string{"", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"}
	if n < len(words) {
		return words[n]
	}
	return "next"
}

// fromText renders FROM's relation canonically: the name as registered,
// or the subquery's branches.
func fromText(sel *Select, from string) string {
	if sel.Sub == nil {
		return quoteIdent(from)
	}
	parts := make([]string, len(sel.Sub))
	for i, b := range sel.Sub {
		parts[i] = canonical(b, b.From)
	}
	s := "(" + strings.Join(parts, " union all ") + ")"
	if sel.SubAlias != "" {
		s += " as " + quoteIdent(sel.SubAlias)
	}
	return s
}

// pushWhere moves the WHERE of a query over a subquery without
// aggregation into the subquery's branches, as Spark's optimizer pushes a
// filter through a projection and a union (PushPredicateThroughNonJoin):
// so that the watermark sees the rows as Spark's does, the conjuncts that
// do not read the event-time column land below it. Over one SELECT the
// whole WHERE moves (the branch's own pushdown splits it); over a UNION
// ALL, whose watermark sits on the union, the conjuncts that read the
// event-time column stay above it. It returns sel unchanged when a branch
// aggregates or computes columns, or when a column does not map.
func pushWhere(sel *Select, eventTime string) *Select {
	if sel.Where == nil || sel.Sub == nil {
		return sel
	}
	first := sel.Sub[0]
	for _, b := range sel.Sub {
		if len(b.GroupBy) > 0 || b.Having != nil || b.Distinct || b.Sub != nil || b.Star != first.Star || !b.Star && !plainColumns(b.Items) ||
			!b.Star && len(b.Items) != len(first.Items) {
			return sel
		}
	}
	move, keep := sel.Where, filter.Expr(nil)
	if len(sel.Sub) > 1 && eventTime != "" {
		move = nil
		for _, c := range filter.Conjuncts(sel.Where) {
			if slices.Contains(filter.Columns(c), eventTime) {
				keep = andOf(keep, c)
			} else {
				move = andOf(move, c)
			}
		}
		if move == nil {
			return sel
		}
	}
	out := *sel
	out.Sub = make([]*Select, len(sel.Sub))
	for k, b := range sel.Sub {
		// The outer query names the first branch's output columns; branch
		// k's column at the same position stands for each.
		names := map[string]string{}
		for i, it := range first.Items {
			name := strings.ToLower(it.Col)
			if it.As != "" {
				name = strings.ToLower(it.As)
			}
			names[name] = b.Items[i].Col
		}
		ok := true
		w := expr.Rewrite(move, func(n expr.Expr) (expr.Expr, bool) {
			c, isCol := n.(filter.Col)
			if !isCol || b.Star {
				return nil, false
			}
			in, found := names[c.Name]
			ok = ok && found
			return filter.Col{Name: in, Display: c.Display}, true
		})
		if !ok {
			return sel
		}
		cp := *b
		cp.Where = andOf(b.Where, w)
		out.Sub[k] = &cp
	}
	out.Where = keep
	return &out
}

func andOf(a, b filter.Expr) filter.Expr {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return filter.And{L: a, R: b}
}
