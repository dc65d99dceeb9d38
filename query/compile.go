package query

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

// Relation is a name FROM can read: one source, or a view over several
// (the union by name of their rows, each with the literal column
// stream.ColSource). The caller registers them; the query package knows
// no name of its own.
type Relation struct {
	Name string
	// Sources are indexes into Options.Sources.
	Sources []int
}

// Options are what a query runs with besides its text: Spark's
// withWatermark and outputMode, the SQL settings, and the input it
// resolves against.
type Options struct {
	// WatermarkColumn and WatermarkDelay are withWatermark(column, delay);
	// an empty column means no watermark.
	WatermarkColumn string
	WatermarkDelay  time.Duration
	// EventTimes are, for a query without WatermarkColumn, the watermarks
	// it may run with (the event times of a join's relations, in the
	// joined rows): the one on the column its window (or session window)
	// reads, the first when it has no window, none when its window reads
	// none of them. A query over a subquery takes none of them.
	EventTimes []EventTime
	// OutputMode is outputMode: update (default), append or complete.
	OutputMode string
	// Sources are the names of the query's input streams, in --source order.
	Sources []string
	// Schemas are the sources' declared schemas (stream.Source.Schema), one
	// per entry of Sources: a relation's columns are those every source it
	// reads declares, with one type (a union by name), plus the literal
	// stream.ColSource.
	Schemas []stream.Schema
	// Relations are the names FROM resolves (case-insensitively). Nil means
	// each source under its own name.
	Relations []Relation
	// NoGroupByAliases is spark.sql.groupByAliases=false: a GROUP BY name
	// resolves to input columns only, never to a SELECT alias.
	NoGroupByAliases bool
	// NoGroupByOrdinal is spark.sql.groupByOrdinal=false: GROUP BY 1 is the
	// constant 1, not the first SELECT item.
	NoGroupByOrdinal bool
	// NonANSI is spark.sql.ansi.enabled=false (Spark 3's default): casts
	// that fail give null, and the aggregation's long sums wrap.
	NonANSI bool
}

// EventTime is a watermark a query may run with (Options.EventTimes).
type EventTime struct {
	Column string
	Delay  time.Duration
}

// Compiled is a query resolved against its input: what the engine runs.
type Compiled struct {
	// Text is the canonical text of the query.
	Text string
	// Sources are the indexes (into Options.Sources) of the sources read.
	Sources []int
	// From is the name of the relation read, as registered.
	From string
	// Spec is the aggregation, the one stateful operator; unset in a query
	// without one (Select is set instead).
	Spec agg.Spec
	// Select, set only in a query with no aggregation (SELECT columns
	// FROM ... [WHERE ...]), is the columns each row keeps, in the order
	// written: the rows are appended to the sink (outputMode append).
	Select []string
	// Where is the compiled filter, nil without WHERE: every row the
	// aggregation sees passed it.
	Where *filter.Predicate
	// PreWatermark holds the conjuncts of the WHERE that Spark's optimizer
	// pushes below the watermark (PushPredicateThroughNonJoin: the
	// deterministic conjuncts that do not read the event-time column); nil
	// without a watermark or without such a conjunct. Only the rows it keeps
	// may advance the watermark (query/doc.go, Evaluation order).
	PreWatermark *filter.Predicate
	// Columns are the input columns read (the projection handed to the
	// sources), with stream.ColSource when the query uses it.
	Columns []string
	// Projection is the SELECT list, canonical, in the order written.
	Projection []string
	// Derived are the columns computed from each input row that passed the
	// WHERE, before the aggregation (group expressions and aggregates'
	// inputs); the aggregation reads them by name.
	Derived []filter.Derived
	// Post is the stage over the aggregation's output (HAVING, expressions
	// over aggregates and group keys), nil without one.
	Post *filter.Post
	// WatermarkColumn and WatermarkDelay are the read path's
	// withWatermark, an empty column without one.
	WatermarkColumn string
	WatermarkDelay  time.Duration
	// Schema is the schema of the rows the plan hands the sink.
	Schema stream.Schema
	// Steps are the plan after the read path, in order (query/plan.go):
	// what the caller builds. Spec, Derived and Post above are its first
	// aggregation's, Select the read path's projection of a plan without
	// one.
	Steps []Step
}

// Watermark is the read path's withWatermark: its column and delay, ok
// false without one.
func (c *Compiled) Watermark() (column string, delay time.Duration, ok bool) {
	return c.WatermarkColumn, c.WatermarkDelay, c.WatermarkColumn != ""
}

// Stateful reports whether the query has a stateful operator (an
// aggregation); a query without one appends the rows it selects.
func (c *Compiled) Stateful() bool { return c.Operators() > 0 }

// ParseOutputMode reads Spark's outputMode names.
func ParseOutputMode(s string) (agg.OutputMode, error) {
	switch strings.ToLower(s) {
	case "", "update":
		return agg.Update, nil
	case "append":
		return agg.Append, nil
	case "complete":
		return agg.Complete, nil
	}
	return 0, errcode.New(errcode.InvalidArgument, "", "use update, append or complete", "unknown output mode %q", s)
}

// ParseWatermark reads "column, delay" (withWatermark's two arguments), e.g.
// "block_ts, 48 hours".
func ParseWatermark(s string) (string, time.Duration, error) {
	col, delay, ok := strings.Cut(s, ",")
	col = strings.ToLower(strings.TrimSpace(col))
	if !ok || col == "" {
		return "", 0, errcode.New(errcode.InvalidArgument, "", "pass --with-watermark 'block_ts, 48 hours'",
			"--with-watermark %q: want COLUMN, DELAY", s)
	}
	delay = strings.TrimSpace(delay)
	if n := strings.TrimSpace(strings.TrimPrefix(strings.ToLower(delay), "interval")); strings.HasPrefix(n, "-") {
		// Spark's Dataset.withWatermark: require(!isNegative(delay)). A
		// delay of 0 is a watermark: the max event time seen.
		return "", 0, errcode.New(errcode.InvalidArgument, "", "use a delay of 0 or more, e.g. 'block_ts, 0 seconds'",
			"--with-watermark %q: delay threshold (%s) should not be negative", s, delay)
	}
	d, err := ParseInterval(delay)
	if err != nil {
		return "", 0, err
	}
	return col, d, nil
}

func invalidQuery(src string, pos int, remedy, format string, args ...any) error {
	e := errcode.New(CodeInvalidQuery, "", remedy, format, args...)
	e.Msg += " (at " + position(src, pos) + ")"
	return e
}

// Compile parses src and resolves it against o.
func Compile(src string, o Options) (*Compiled, error) {
	sel, err := Parse(src)
	if err != nil {
		return nil, err
	}
	c, err := compileSelect(src, sel, o, true)
	if err != nil {
		return nil, err
	}
	c.Text = canonical(sel, c.From)
	return c, nil
}

// compileSelect resolves one SELECT: over a relation, or over the plan of
// the subquery it reads (query/nested.go). top is set for the query's
// outermost SELECT, whose rows go to the sink.
func compileSelect(src string, sel *Select, o Options, top bool) (*Compiled, error) {
	r := &resolver{src: src, sel: sel, o: o, c: &Compiled{}, top: top,
		spec:     agg.Spec{ColumnTypes: map[string]stream.Type{}},
		selected: map[string]bool{}, names: map[string]bool{}, groupExprs: map[string]string{}, aggByText: map[string]string{}}
	if sel.Sub != nil {
		sel = pushWhere(sel, o.WatermarkColumn)
		r.sel = sel
		in, err := compileFrom(src, sel, o)
		if err != nil {
			return nil, err
		}
		r.in = in
	}
	for _, step := range []func() error{r.from, r.star, r.distinct, r.groupBy, r.windowSpec, r.selectList, r.where, r.options, r.sessionCheck, r.post, r.windowedDerive} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	r.columns()
	r.c.Spec = r.spec
	if err := r.plan(); err != nil {
		return nil, err
	}
	if err := r.orderLimit(); err != nil {
		return nil, err
	}
	return r.c, nil
}

// resolver resolves one parsed query, clause by clause.
type resolver struct {
	src string
	sel *Select
	o   Options
	c   *Compiled
	// in is the subquery's plan the query reads, nil when it reads a
	// relation; top is set for the outermost query.
	in       *input
	top      bool
	rename   bool // a stateless SELECT renames a column (AS)
	spec     agg.Spec
	window   *WindowCall
	schema   []stream.Field  // the FROM relation's columns
	selected map[string]bool // group keys and window selected
	names    map[string]bool // output names claimed, lowercase
	// groupExprs maps a GROUP BY expression's text to its derived column.
	groupExprs map[string]string
	// aggByText maps an aggregate's text (sum(gas_used)) to its output
	// column, for expressions over aggregates and HAVING to reuse.
	aggByText map[string]string
	// postSrc are the SELECT expressions over aggregates and group keys, with
	// their aggregates replaced by output columns.
	postSrc []postItem
	hidden  []string // the hidden aggregates (output columns the post stage drops)
	// outNames are a stateless SELECT's output names, one per Select column.
	outNames []string
	// where2 is the WHERE over a subquery's plan (a step, not the read path).
	where2 *filter.Predicate
	// session is the session window when the grouping window is one.
	session *SessionWindow
	// row is a stateless SELECT's expressions and generator
	// (query/generate.go), nil without.
	row *rowPlan
}

func (r *resolver) colType(name string) (stream.Type, bool) {
	if name == stream.ColSource && r.in == nil {
		return stream.String, true
	}
	for _, f := range r.schema {
		if f.Name == name {
			return f.Type, true
		}
	}
	if name == ColWindowTime && r.window != nil && r.window.OfWindow && r.windowed() {
		return stream.Timestamp, true // derived by plan, window_time(window)
	}
	return 0, false
}

// relationSchema is the columns of a relation over sources: those every
// source declares, with one type, in the first source's order.
func (r *resolver) relationSchema(sources []int) []stream.Field {
	if len(sources) == 0 || sources[0] >= len(r.o.Schemas) {
		return nil
	}
	var out []stream.Field
	for _, f := range r.o.Schemas[sources[0]].Fields {
		all := true
		for _, i := range sources[1:] {
			sc := r.o.Schemas[i]
			g := sc.Field(f.Name)
			all = all && g != nil && g.Type == f.Type
		}
		if all && f.Name != stream.ColSource {
			out = append(out, f)
		}
	}
	return out
}

func (r *resolver) unresolved(pos int, name string) error {
	names := make([]string, 0, len(r.schema)+1)
	for _, f := range r.schema {
		names = append(names, f.Name)
	}
	e := errcode.New(CodeUnresolvedColumn, "", "use one of: "+strings.Join(append(names, stream.ColSource), ", "),
		"column %q does not exist", name)
	e.Msg += " (at " + position(r.src, pos) + ")"
	return e
}

// from resolves the FROM name among the registered relations,
// case-insensitively (Spark's identifiers are).
func (r *resolver) from() error {
	if r.in != nil {
		r.schema = r.in.schema
		return nil
	}
	rels := r.o.Relations
	if rels == nil {
		for i, s := range r.o.Sources {
			rels = append(rels, Relation{Name: s, Sources: []int{i}})
		}
	}
	var names []string
	for _, rel := range rels {
		if strings.EqualFold(rel.Name, r.sel.From) {
			r.c.From, r.c.Sources = rel.Name, slices.Clone(rel.Sources)
			r.schema = r.relationSchema(rel.Sources)
			return nil
		}
		names = append(names, rel.Name)
	}
	e := errcode.New(CodeTableNotFound, "", "read FROM one of: "+strings.Join(names, ", "),
		"FROM %s: the table or view %s cannot be found (no --source or view has that name)", r.sel.From, quoteIdent(r.sel.From))
	e.Msg += " (at " + position(r.src, r.sel.FromPos) + ")"
	return e
}

// groupBy resolves each GROUP BY item to the window or a group column.
func (r *resolver) groupBy() error {
	for _, g := range r.sel.GroupBy {
		if it := r.groupExprItem(g); it != nil || g.Expr != nil {
			if err := r.groupExpr(g, it); err != nil {
				return err
			}
			continue
		}
		w, col, err := r.groupTarget(g)
		if err != nil {
			return err
		}
		if w != nil {
			if r.window != nil && !r.window.Same(w) {
				return unsupported(r.src, g.Pos, "more than one window() in GROUP BY")
			}
			r.window = w
			continue
		}
		t, ok := r.colType(col)
		if !ok {
			return r.unresolved(g.Pos, col)
		}
		if slices.Contains(r.spec.GroupBy, col) {
			return invalidQuery(r.src, g.Pos, "name each group key once", "GROUP BY %s appears twice", col)
		}
		if err := r.arrayKey(g.Pos, col, t); err != nil {
			return err
		}
		r.spec.GroupBy = append(r.spec.GroupBy, col)
		r.spec.ColumnTypes[col] = t
	}
	return nil
}

// groupTarget is what a GROUP BY item names: a window, or a column. A name
// is an input column first, then (spark.sql.groupByAliases) a SELECT
// alias; an ordinal (spark.sql.groupByOrdinal) is a SELECT item.
func (r *resolver) groupTarget(g GroupItem) (*WindowCall, string, error) {
	items := r.sel.Items
	switch {
	case g.Ordinal != 0:
		if r.o.NoGroupByOrdinal {
			return nil, "", unsupported(r.src, g.Pos, "GROUP BY a constant (spark.sql.groupByOrdinal is false, so "+g.String()+" is not a position)")
		}
		if g.Ordinal < 1 || g.Ordinal > len(items) {
			return nil, "", invalidQuery(r.src, g.Pos, "use a position of the SELECT list",
				"GROUP BY position %s is not in select list (valid range is [1, %d])", g.ordinalText(), len(items))
		}
		return r.itemTarget(items[g.Ordinal-1], g)
	case g.Window != nil && !g.Window.Ref:
		return g.Window, "", nil
	case g.Window != nil: // GROUP BY window
		if !r.o.NoGroupByAliases {
			for _, it := range items {
				if it.Window != nil && !it.Window.Ref && it.Window.Session == g.Window.Session &&
					(it.As == "" || strings.EqualFold(it.As, "window") || it.Window.Session && it.Window.Field == "") {
					return it.Window, "", nil
				}
			}
		}
		return nil, "", invalidQuery(r.src, g.Pos, "group by window(block_ts, '5 minutes'), or select window(...) AS window and group by window",
			"GROUP BY window needs its arguments")
	}
	if _, ok := r.colType(g.Col); ok || r.o.NoGroupByAliases {
		return nil, g.Col, nil
	}
	for _, it := range items {
		if it.As != "" && strings.EqualFold(it.As, g.Col) {
			return r.itemTarget(it, g)
		}
	}
	return nil, g.Col, nil
}

// itemTarget is the group a SELECT item makes when GROUP BY names it.
func (r *resolver) itemTarget(it Item, g GroupItem) (*WindowCall, string, error) {
	switch {
	case it.Agg != "":
		return nil, "", invalidQuery(r.src, g.Pos, "group by columns or window(...), and aggregate in SELECT",
			"GROUP BY %s refers to an expression %s that contains an aggregate function. Aggregate functions are not allowed in GROUP BY", g, it.String())
	case it.Window != nil && it.Window.Ref:
		return nil, "", r.unresolved(it.Pos, "window")
	case it.Window != nil:
		return it.Window, "", nil
	}
	return nil, it.Col, nil
}

func (g GroupItem) ordinalText() string {
	if g.Ordinal < 0 {
		return "0"
	}
	return g.String()
}

// windowSpec checks the grouping window and makes it agg's.
func (r *resolver) windowSpec() error {
	w := r.window
	if w == nil {
		return nil
	}
	if w.Session {
		return r.sessionSpec(w)
	}
	t, ok := r.colType(w.Col)
	if !ok {
		return r.unresolved(w.Pos, w.Col)
	}
	if t != stream.Timestamp {
		return invalidQuery(r.src, w.Pos, "window over a timestamp column such as block_ts",
			"window(%s, ...): %s is %s, not a timestamp", w.Col, w.Col, t)
	}
	if w.Size <= 0 {
		return invalidQuery(r.src, w.Pos, "use a positive window size", "the window duration of %s is zero", w)
	}
	if w.slide() > w.Size {
		return invalidQuery(r.src, w.Pos, "use a slide between 1 microsecond and the window size",
			"window slide %s is not within (0, %s]", FormatInterval(w.slide()), FormatInterval(w.Size))
	}
	if w.Start >= w.slide() {
		// Spark: "The absolute value of start time must be less than the slide duration".
		return invalidQuery(r.src, w.Pos, "use a startTime below the slide",
			"the window startTime %s must be less than the slide duration %s", FormatInterval(w.Start), FormatInterval(w.slide()))
	}
	r.spec.Window = &agg.Window{Column: w.Col, Size: w.Size, Start: w.Start}
	if w.Slide != 0 {
		r.spec.Window.Slide = w.Slide
	}
	r.spec.ColumnTypes[w.Col] = t
	return nil
}

// claim reserves an output column name; Delta, like Spark, compares
// column names case-insensitively.
func (r *resolver) claim(pos int, name string) error {
	k := strings.ToLower(name)
	if r.names[k] {
		return invalidQuery(r.src, pos, "give each output column its own name with AS", "output column %q appears twice", name)
	}
	r.names[k] = true
	return nil
}

// selectList resolves the SELECT items against the groups; a query with
// neither GROUP BY nor an aggregate or window selects rows (selectRows).
func (r *resolver) selectList() error {
	if _, err := r.checkGenerators(); err != nil {
		return err
	}
	if r.stateless() {
		return r.selectRows()
	}
	for _, it := range r.sel.Items {
		r.c.Projection = append(r.c.Projection, it.String())
		var err error
		switch {
		case it.Window != nil && it.Window.Session:
			err = r.selectSession(it)
		case it.Window != nil:
			err = r.selectWindow(it)
		case it.Agg != "":
			err = r.selectAggregate(it)
		case it.Expr != nil:
			err = r.selectExpr(it)
		default:
			err = r.selectColumn(it)
		}
		if err != nil {
			return err
		}
	}
	if len(r.spec.Aggregates) == 0 && r.sel.Distinct {
		// Spark's ReplaceDistinctWithAggregate: the columns are the keys.
		// agg keeps a row count per key, which the post stage drops.
		r.hidden = append(r.hidden, "__distinct_rows")
		r.spec.Aggregates = append(r.spec.Aggregates, agg.Aggregate{Kind: agg.Count, As: "__distinct_rows"})
	}
	if len(r.spec.Aggregates) == 0 {
		return invalidQuery(r.src, 0, "add count(*), sum(col), min, max or avg", "the query has no aggregate")
	}
	if r.session != nil && !r.selected["session_window"] {
		return invalidQuery(r.src, r.window.Pos, "select session_window (or session_window.start) too", "GROUP BY session_window(...) but the session window is not selected: the table could not tell sessions apart")
	}
	if r.window != nil && !r.window.Session && !r.selected["window"] {
		return invalidQuery(r.src, r.window.Pos, "select window too", "GROUP BY window(...) but the window is not selected: the table could not tell windows apart")
	}
	for _, g := range r.spec.GroupBy {
		if !r.selected[g] {
			return invalidQuery(r.src, 0, "select "+g+" too", "GROUP BY %s but %s is not selected: the table could not tell its groups apart", g, g)
		}
	}
	return nil
}

// stateless reports whether the query has no stateful operator: no GROUP
// BY, no aggregate, no window.
func (r *resolver) stateless() bool {
	if len(r.sel.GroupBy) > 0 {
		return false
	}
	for _, it := range r.sel.Items {
		if _, gen := generatorOf(it.Expr); gen || it.Expr != nil && !isAggregate(it.Expr) && it.Window == nil {
			continue // a generator (checkGenerators allowed it) or an expression of a row
		}
		// Only plain columns: an expression may hold an aggregate.
		if it.Agg != "" || it.Window != nil || it.Expr != nil || it.Col == "" {
			return false
		}
	}
	return r.sel.Having == nil
}

// selectRows resolves the SELECT list of a query with no stateful
// operator: input columns, each kept under its own name.
func (r *resolver) selectRows() error {
	for _, it := range r.sel.Items {
		r.c.Projection = append(r.c.Projection, it.String())
		if _, gen := generatorOf(it.Expr); gen {
			if err := r.selectGenerator(it); err != nil {
				return err
			}
			continue
		}
		if it.Expr != nil {
			if err := r.selectRowExpr(it); err != nil {
				return err
			}
			continue
		}
		if it.Col == "window" && r.windowed() {
			// The window of the aggregation the subquery runs: its bounds.
			if it.As != "" && !strings.EqualFold(it.As, "window") {
				return unsupported(r.src, it.Pos, "renaming the window (it is the table's window struct; leave AS window or no alias)")
			}
			if err := r.claim(it.Pos, "window"); err != nil {
				return err
			}
			r.c.Select = append(r.c.Select, agg.ColWindowStart, agg.ColWindowEnd)
			r.outNames = append(r.outNames, agg.ColWindowStart, agg.ColWindowEnd)
			continue
		}
		if it.Col == "window" {
			return invalidQuery(r.src, it.Pos, "group by window(...)", "window is not a column")
		}
		if _, ok := r.colType(it.Col); !ok {
			return r.unresolved(it.Pos, it.Col)
		}
		out := it.Col
		if it.As != "" && it.As != it.Col {
			if !validColumnName(it.As) {
				return invalidQuery(r.src, it.Pos, "use an alias of letters, digits and underscores", "output column name %q is not valid in a Delta table", it.As)
			}
			out, r.rename = it.As, true
		}
		if err := r.claim(it.Pos, out); err != nil {
			return err
		}
		r.c.Select = append(r.c.Select, it.Col)
		r.outNames = append(r.outNames, out)
	}
	return nil
}

func (r *resolver) selectWindow(it Item) error {
	if r.window == nil || r.window.Session {
		return invalidQuery(r.src, it.Pos, "add the window to GROUP BY", "SELECT %s without GROUP BY window(...)", it.Window)
	}
	if !it.Window.Ref && !it.Window.Same(r.window) {
		return invalidQuery(r.src, it.Pos, "select the window of GROUP BY ("+r.window.String()+"), or just window",
			"SELECT %s differs from GROUP BY %s", it.Window, r.window)
	}
	if it.As != "" && !strings.EqualFold(it.As, "window") {
		return unsupported(r.src, it.Pos, "renaming the window (it is the table's window struct; leave AS window or no alias)")
	}
	r.selected["window"] = true
	return r.claim(it.Pos, "window")
}

var aggKinds = map[string]agg.AggKind{"count": agg.Count, "sum": agg.Sum, "min": agg.Min, "max": agg.Max, "avg": agg.Avg,
	"approx_count_distinct": agg.ApproxCountDistinct}

func (r *resolver) selectAggregate(it Item) error {
	a := agg.Aggregate{Kind: aggKinds[it.Agg], Column: it.AggCol, As: it.As}
	if a.Column != "" {
		t, ok := r.colType(a.Column)
		if !ok {
			return r.unresolved(it.Pos, a.Column)
		}
		if it.Agg != "count" && t.Kind() == stream.Array {
			return invalidQuery(r.src, it.Pos, "aggregate the array's elements (explode in a subquery) or size(a)", "%s(%s): %s is %s", it.Agg, a.Column, a.Column, strings.ToUpper(t.String()))
		}
		if it.Agg != "count" && it.Agg != "approx_count_distinct" {
			switch {
			case t == stream.String:
				return invalidQuery(r.src, it.Pos, "aggregate a numeric column", "%s(%s): %s is a string", it.Agg, a.Column, a.Column)
			case t == stream.Timestamp && (a.Kind == agg.Sum || a.Kind == agg.Avg):
				return invalidQuery(r.src, it.Pos, "use min or max of a timestamp", "%s(%s): %s is a timestamp", it.Agg, a.Column, a.Column)
			}
		}
		r.spec.ColumnTypes[a.Column] = t
	}
	name := a.As
	if name == "" {
		name = "count"
		if a.Column != "" {
			name = it.Agg + "_" + a.Column
		}
	}
	if !validColumnName(name) {
		return invalidQuery(r.src, it.Pos, "use an alias of letters, digits and underscores", "output column name %q is not valid in a Delta table", name)
	}
	if err := r.claim(it.Pos, name); err != nil {
		return err
	}
	call := expr.Call{Name: it.Agg, Star: it.AggCol == ""}
	if it.AggCol != "" {
		call.Args = []expr.Expr{filter.Col{Name: it.AggCol}}
	}
	r.aggByText[call.String()] = name
	r.spec.Aggregates = append(r.spec.Aggregates, a)
	return nil
}

func (r *resolver) selectColumn(it Item) error {
	if it.Col == "window" {
		return invalidQuery(r.src, it.Pos, "group by window(...)", "window is not a column")
	}
	if _, ok := r.colType(it.Col); !ok {
		return r.unresolved(it.Pos, it.Col)
	}
	if len(r.sel.GroupBy) == 0 {
		return invalidQuery(r.src, it.Pos, "add GROUP BY "+it.Col+", or select aggregates only (a global aggregation)",
			"%s is neither in GROUP BY nor aggregated: a query without GROUP BY selects aggregates only", it.Col)
	}
	if !slices.Contains(r.spec.GroupBy, it.Col) {
		return invalidQuery(r.src, it.Pos, "add "+it.Col+" to GROUP BY or aggregate it",
			"%s is neither in GROUP BY nor aggregated", it.Col)
	}
	if it.As != "" && !strings.EqualFold(it.As, it.Col) {
		return unsupported(r.src, it.Pos, "renaming a group key (AS "+it.As+")")
	}
	r.selected[it.Col] = true
	return r.claim(it.Pos, it.Col)
}

// where compiles the WHERE and splits off the conjuncts that run before
// the watermark (options decides whether there is one).
func (r *resolver) where() error {
	if r.sel.Where == nil {
		return nil
	}
	if isAggregate(r.sel.Where) {
		return unsupported(r.src, r.sel.WherePos, "an aggregate in WHERE (HAVING)")
	}
	// An unknown column is refused as in SELECT: its position and the
	// columns there are (the filter alone knows neither).
	for _, col := range filter.Columns(r.sel.Where) {
		if _, ok := r.colType(col); !ok {
			return r.unresolved(identPos(r.src, col, r.sel.WherePos), col)
		}
	}
	p, err := filter.CompileWith(r.sel.Where, r.colType, filter.Options{NonANSI: r.o.NonANSI})
	if err != nil {
		return err
	}
	if r.in != nil {
		// Over a subquery's plan, a step of the plan.
		r.where2 = p
		return nil
	}
	r.c.Where = p
	for _, col := range p.Columns() {
		if t, ok := r.colType(col); ok {
			r.spec.ColumnTypes[col] = t
		}
	}
	return nil
}

// options applies the output mode and withWatermark.
func (r *resolver) options() error {
	mode, err := ParseOutputMode(r.o.OutputMode)
	if err != nil {
		return err
	}
	if r.c.Select != nil && mode != agg.Append && r.top && (r.in == nil || !r.in.stateful) {
		// Columns only, no aggregate: a stateless query, which Spark's
		// Delta sink takes in append mode only. GROUP BY alone would only
		// lead to "the query has no aggregate": say what each intent needs.
		it := r.sel.Items[0]
		col := it.Col
		if col == "" {
			col = it.String() // an expression or a generator
		}
		return invalidQuery(r.src, it.Pos, "to aggregate per "+col+", add an aggregate and GROUP BY "+col+
			" (SELECT "+col+", count(*) ... GROUP BY "+col+"); to stream the rows themselves, a stateless query, select them with --output-mode append",
			"%s is selected without an aggregate: the query selects columns only", col)
	}
	r.spec.Mode = mode
	r.spec.NonANSI = r.o.NonANSI
	col, delay := r.o.WatermarkColumn, r.o.WatermarkDelay
	if col == "" && r.in == nil {
		col, delay = r.eventTime()
	}
	if col == "" {
		return nil
	}
	if r.in != nil {
		return r.nestedWatermark(col)
	}
	t, ok := r.colType(col)
	if !ok {
		return errcode.New(CodeUnresolvedColumn, "", "set the watermark on a timestamp column such as block_ts",
			"withWatermark(%s): column %q does not exist", col, col)
	}
	if t != stream.Timestamp {
		// Spark: EVENT_TIME_IS_NOT_ON_TIMESTAMP_TYPE.
		return errcode.New(CodeUnsupported, "", "set the watermark on a timestamp column such as block_ts",
			"withWatermark(%s): the event time %s has the invalid type %s, but expected \"TIMESTAMP\"", col, col, t)
	}
	if r.window != nil && col != r.window.Col {
		return errcode.New(CodeUnsupported, "", "set the watermark on the window's event-time column",
			"withWatermark(%s): ethstream evicts state by the window's event time; a watermark on another column is not supported", col)
	}
	r.spec.WatermarkDelay, r.spec.HasWatermark = delay, true
	r.spec.WatermarkColumn = col
	r.spec.ColumnTypes[col] = t
	r.c.WatermarkColumn, r.c.WatermarkDelay = col, delay
	if r.c.Where != nil {
		pre, err := r.pushDown(col)
		if err != nil {
			return err
		}
		r.c.PreWatermark = pre
	}
	return nil
}

// eventTime picks the watermark of Options.EventTimes the query runs with:
// the one on its window's event-time column, the first without a window,
// none ("") when the window reads none of them (withWatermark on another
// column is refused: options).
func (r *resolver) eventTime() (string, time.Duration) {
	for _, e := range r.o.EventTimes {
		if r.window == nil || e.Column == r.window.Col {
			return e.Column, e.Delay
		}
	}
	return "", 0
}

// pushDown compiles the conjuncts of the WHERE that do not read the
// event-time column: Spark's PushPredicateThroughNonJoin moves each such
// (deterministic; all of ours are) conjunct below EventTimeWatermark.
func (r *resolver) pushDown(eventTime string) (*filter.Predicate, error) {
	var pushed filter.Expr
	for _, c := range filter.Conjuncts(r.sel.Where) {
		if slices.Contains(filter.Columns(c), eventTime) {
			continue
		}
		if pushed == nil {
			pushed = c
		} else {
			pushed = filter.And{L: pushed, R: c}
		}
	}
	if pushed == nil {
		return nil, nil
	}
	return filter.CompileWith(pushed, r.colType, filter.Options{NonANSI: r.o.NonANSI})
}

// columns sets the projection: the columns read, the source column
// included when used.
func (r *resolver) columns() {
	if r.in != nil {
		return // the subquery's read path
	}
	var cols []string
	if r.c.Select == nil {
		for _, c := range r.spec.InputColumns() {
			if !slices.ContainsFunc(r.c.Derived, func(d filter.Derived) bool { return d.Name == c }) {
				cols = append(cols, c)
			}
		}
	}
	add := func(list []string) {
		for _, col := range list {
			if !slices.Contains(cols, col) {
				cols = append(cols, col)
			}
		}
	}
	add(r.c.Select)
	if r.row != nil {
		add(r.row.inputs)
	}
	if r.c.Where != nil {
		add(r.c.Where.Columns())
	}
	for _, d := range r.c.Derived {
		add(d.Expr.Columns())
	}
	if r.spec.WatermarkColumn != "" {
		add([]string{r.spec.WatermarkColumn})
	}
	if r.session != nil {
		add([]string{r.session.Column})
	}
	r.c.Columns = cols
}

// validColumnName refuses the characters Delta does not allow in column
// names without column mapping.
func validColumnName(s string) bool {
	return s != "" && !strings.ContainsAny(s, " ,;{}()\n\t=")
}

// canonical renders a parsed query in one normal form (lowercase keywords,
// single spaces, fully parenthesised WHERE), reading FROM the relation as
// registered.
func canonical(sel *Select, from string) string {
	var b strings.Builder
	b.WriteString("select ")
	if sel.Distinct {
		b.WriteString("distinct ")
	}
	if sel.Star {
		b.WriteString("*")
	}
	for i, it := range sel.Items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(it.String())
	}
	b.WriteString(" from " + fromText(sel, from))
	if sel.Where != nil {
		b.WriteString(" where " + sel.Where.String())
	}
	if len(sel.GroupBy) > 0 {
		b.WriteString(" group by ")
		for i, g := range sel.GroupBy {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(g.String())
		}
	}
	if sel.Having != nil {
		b.WriteString(" having " + sel.Having.String())
	}
	if len(sel.OrderBy) > 0 {
		b.WriteString(" order by ")
		for i, o := range sel.OrderBy {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(o.String())
		}
	}
	if sel.Limit != nil {
		b.WriteString(" limit " + strconv.FormatInt(*sel.Limit, 10))
	}
	return b.String()
}

// identPos is the offset of the first identifier named name (case-
// insensitively, quoted or not) at or after from in src; from if there is
// none.
func identPos(src, name string, from int) int {
	toks, err := lex(src)
	if err != nil {
		return from
	}
	for _, t := range toks {
		if t.pos >= from && (t.kind == tIdent || t.kind == tQuoted) && strings.EqualFold(t.text, name) {
			return t.pos
		}
	}
	return from
}
