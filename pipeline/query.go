package pipeline

import (
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/limit"
	"github.com/ethstream/ethstream/query"
	"github.com/ethstream/ethstream/session"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/sources/files"
	"github.com/ethstream/ethstream/stream"
)

// ReferenceQuery is the reference query (docs/contracts.md, Reference query)
// in SQL: what `ethstream run` runs without --query, with
// ReferenceWatermark and update mode.
const ReferenceQuery = "SELECT window(block_ts, '5 minutes') AS window, source, miner, count(*) AS count " +
	"FROM blocks GROUP BY window(block_ts, '5 minutes'), source, miner"

// ReferenceWatermark is the reference query's withWatermark.
const ReferenceWatermark = "block_ts, 48 hours"

// compiled is a Config's query, resolved: the sources it reads, the
// aggregation (nil in a query without one: the engine appends the rows
// its read path keeps), and its shape for the checkpoint. The WHERE runs
// in the engine's read path (engine.Query.Where), not around the operator.
type compiled struct {
	q       *query.Compiled
	sources []SourceSpec
	agg     *agg.Operator
	// sess is the session window aggregation when the query groups by
	// session_window (then agg is nil).
	sess *session.Operator
	// op is the operator the engine runs: agg (or sess), inside
	// filter.Operator when the query derives columns or has a
	// post-aggregation stage.
	op stream.Operator
	// steps are the plan's operators, one per step of q.Steps (nil for a
	// stateless step); steps[first] is op.
	steps []stream.Operator
	shape shape.Shape
	// in is the schema of the rows read (the first source's declaration).
	in stream.Schema
	// shaped: the plan's shape is flow's, derived with each operator's
	// entry (a query over a join's rows, pipeline/join_outer.go).
	shaped bool
}

// apply sets q's read path: the columns read, the watermark, the WHERE
// and its pushed-down part (run by the engine's read path: nothing is
// wrapped around the sources or the operator) and, in a plan without an
// operator, the columns selected. The plan's steps are flow's (addSteps).
func (c *compiled) apply(q *engine.Query) {
	q.Columns = c.q.Columns
	q.Watermark, q.Where, q.PreWatermark = nil, nil, nil
	if col, delay, ok := c.q.Watermark(); ok {
		q.Watermark = &engine.Watermark{Column: col, Delay: delay}
	}
	// A nil predicate must stay a nil interface.
	if c.q.Where != nil {
		q.Where = c.q.Where
	}
	if c.q.PreWatermark != nil && q.Watermark != nil {
		q.PreWatermark = c.q.PreWatermark
	}
	q.Select = c.q.Select
}

// plan sets q's read path and its plan, built through flow from q's
// sources as Build builds it (for a caller with its own sources and sink).
func (c *compiled) plan(q *engine.Query) error {
	fq := flow.New(q.Name)
	for _, ns := range q.Sources {
		fq.Read(ns.Name, ns.Source)
	}
	fq.Columns(c.q.Columns...) // the watermark is the read path's (apply)
	c.addSteps(fq)
	eq, err := fq.Shape(nil).Build()
	if err != nil {
		return err
	}
	q.Operator, q.Stages = eq.Operator, eq.Stages
	c.apply(q)
	return nil
}

// addSteps appends the compiled plan's steps to fq, each as the Go API's
// call of its kind: the one place a compiled query becomes a flow plan.
func (c *compiled) addSteps(fq *flow.Query) {
	for i, st := range c.q.Steps {
		switch {
		case st.Aggregate != nil && c.shaped:
			sh, _ := stepShape(c.steps[i])
			fq.OperatorShaped(c.steps[i], sh)
		case st.Aggregate != nil:
			fq.Operator(c.steps[i])
		case st.GlobalLimit != nil:
			sh, _ := stepShape(c.steps[i])
			fq.OperatorShaped(c.steps[i], sh)
		case st.Where != nil:
			fq.Filter(st.Where)
		case st.Derive != nil:
			fq.Derive(st.Derive...)
		case st.Project != nil:
			cols := make([]flow.Column, len(st.Project))
			for j, pc := range st.Project {
				cols[j] = flow.Col(pc.Name)
				if pc.WindowTime {
					cols[j] = flow.WindowTime()
				}
				if pc.As != "" {
					cols[j] = cols[j].As(pc.As)
				}
			}
			fq.Select(cols...)
		case st.Sort != nil:
			keys := make([]flow.SortKey, len(st.Sort))
			for j, k := range st.Sort {
				keys[j] = flow.SortKey{Column: k.Column, Desc: k.Desc, NullsFirst: k.NullsFirst}
			}
			fq.Sort(keys...)
		case st.Limit != nil:
			fq.Limit(*st.Limit)
		case st.Generate != nil:
			fq.Transform(st.Generate)
		}
	}
}

// globalLimit reports whether the plan has a LIMIT of append mode.
func (c *compiled) globalLimit() bool {
	return slices.ContainsFunc(c.q.Steps, func(st query.Step) bool { return st.GlobalLimit != nil })
}

// limits reports whether the plan has a LIMIT step.
func (c *compiled) limits() bool {
	for _, st := range c.q.Steps {
		if st.Limit != nil {
			return true
		}
	}
	return false
}

// buildSteps builds the operators of the plan's stateful steps; the first
// aggregation is c.agg (c.op around it).
func (c *compiled) buildSteps() error {
	c.steps = make([]stream.Operator, len(c.q.Steps))
	c.agg, c.sess, c.op = nil, nil, nil
	for i, st := range c.q.Steps {
		if st.GlobalLimit != nil {
			op, err := limit.New(limit.Spec{N: *st.GlobalLimit, Input: c.q.Schema})
			if err != nil {
				return err
			}
			c.steps[i] = op
			continue
		}
		if st.Aggregate == nil {
			continue
		}
		if st.Aggregate.Session != nil {
			sw, err := session.New(st.Aggregate.SessionSpec())
			if err != nil {
				return err
			}
			c.steps[i] = wrapAgg(sw, st.Aggregate)
			if c.op == nil {
				c.sess, c.op = sw, c.steps[i]
			}
			continue
		}
		a, err := agg.New(st.Aggregate.Spec)
		if err != nil {
			return err
		}
		c.steps[i] = wrapAgg(a, st.Aggregate)
		if c.op == nil {
			c.agg, c.op = a, c.steps[i]
		}
	}
	return nil
}

// setFirst replaces the first aggregation by a (rebuilt in another state
// format, or for retractions).
func (c *compiled) setFirst(a *agg.Operator) {
	for i, st := range c.q.Steps {
		if st.Aggregate != nil {
			c.steps[i] = wrapAgg(a, st.Aggregate)
			c.agg, c.op = a, c.steps[i]
			return
		}
	}
}

// outputSchema is the schema of the rows the sink receives.
func (c *compiled) outputSchema() stream.Schema {
	if len(c.q.Steps) > 1 || len(c.q.Steps) == 1 && c.agg == nil && c.sess == nil {
		return c.q.Schema // a plan of several steps
	}
	var op stream.SchemaOperator
	switch {
	case c.agg != nil:
		op = c.agg
	case c.sess != nil:
		op = c.sess
	}
	if op != nil {
		if c.q.Post != nil {
			return c.q.Post.Schema(op.OutputSchema())
		}
		return op.OutputSchema()
	}
	s, in := stream.Schema{}, c.in
	for _, col := range c.q.Select {
		t, nullable := stream.String, false
		if col != stream.ColSource {
			if f := in.Field(col); f != nil {
				t, nullable = f.Type, f.Nullable
			}
		}
		s.Fields = append(s.Fields, stream.Field{Name: col, Type: t, Nullable: nullable})
	}
	return s
}

// CompileQuery resolves cfg's query (the reference query when cfg.Query is
// empty) against cfg's sources. It opens nothing.
func CompileQuery(cfg Config) (*compiled, error) {
	text, wm := cfg.Query, cfg.WithWatermark
	if text == "" {
		text = ReferenceQuery
		if wm == "" {
			wm = ReferenceWatermark
		}
	}
	o, err := queryOptions(cfg)
	if err != nil {
		return nil, err
	}
	if wm != "" {
		col, d, err := query.ParseWatermark(wm)
		if err != nil {
			return nil, err
		}
		o.WatermarkColumn, o.WatermarkDelay = col, d
	}
	qc, err := query.Compile(text, o)
	if err != nil {
		return nil, err
	}
	c := &compiled{q: qc}
	if len(qc.Sources) > 0 && qc.Sources[0] < len(o.Schemas) {
		c.in = o.Schemas[qc.Sources[0]]
	}
	for _, i := range qc.Sources {
		c.sources = append(c.sources, cfg.Sources[i])
	}
	if len(c.sources) < len(cfg.Sources) {
		var unread []string
		for i, s := range cfg.Sources {
			if !contains(qc.Sources, i) {
				unread = append(unread, s.String())
			}
		}
		return nil, errcode.New(errcode.InvalidArgument, "", "drop the --source flags the query does not read, or use FROM blocks",
			"the query reads FROM %s only; it does not read --source %s", qc.From, strings.Join(unread, ", --source "))
	}
	if err := c.buildSteps(); err != nil {
		return nil, err
	}
	c.shape = c.buildShape(cfg)
	return c, nil
}

// SourceSchema is the schema the source a spec names declares
// (stream.Source.Schema), known from its format alone, without building
// it: both formats read block rows, or the table their location or table=
// option names (tables.go). The engine checks the query against
// the built source's own declaration again at start.
func SourceSchema(spec SourceSpec) stream.Schema {
	if s, ok := tableSchema(spec); ok {
		return s
	}
	switch spec.Format {
	case "s3archive", "ethrpc":
		return ethblock.StreamSchema()
	}
	return stream.Schema{}
}

// wrapAgg puts an aggregation step's derived columns and post-aggregation
// stage around its operator, when it has them; the query's WHERE runs in
// the engine's read path (engine.Query.Where), not here.
func wrapAgg(a stream.Operator, st *query.Aggregation) stream.Operator {
	if len(st.Derived) == 0 && st.Post == nil {
		return a
	}
	return filter.Wrap(&filter.Operator{Derive: st.Derived, Post: st.Post, Inner: a})
}

// FromAll is the view the ethereum app registers over every --source: the
// union by name of their rows, each with the literal column source (the
// source's name). FROM <name> reads one source.
const FromAll = "blocks"

// queryOptions are the query package's options for cfg: the block schema,
// the blocks view over every source then each source under its own name
// (a source named blocks is read through the view), and the SQL confs.
func queryOptions(cfg Config) (query.Options, error) {
	o := query.Options{OutputMode: cfg.OutputMode}
	tables, err := tableSources(cfg, &o)
	if err != nil {
		return o, err
	}
	all := query.Relation{Name: FromAll}
	for i, s := range cfg.Sources {
		o.Sources = append(o.Sources, s.Name)
		if !tables {
			o.Schemas = append(o.Schemas, SourceSchema(s))
		}
		all.Sources = append(all.Sources, i)
	}
	o.Relations = []query.Relation{all}
	for i, s := range cfg.Sources {
		if !strings.EqualFold(s.Name, FromAll) {
			o.Relations = append(o.Relations, query.Relation{Name: s.Name, Sources: []int{i}})
		}
	}
	for _, c := range []struct {
		key string
		off *bool
	}{{query.ConfANSI, &o.NonANSI}, {query.ConfGroupByAliases, &o.NoGroupByAliases}, {query.ConfGroupByOrdinal, &o.NoGroupByOrdinal}} {
		v, ok := cfg.Conf[c.key]
		if !ok {
			continue
		}
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return o, errcode.New(errcode.InvalidArgument, "", "set "+c.key+" to true or false", "conf %s=%q is not a boolean", c.key, v)
		}
		*c.off = !on
	}
	return o, nil
}

// tableSources sets o.Schemas from the sources' own declarations
// (stream.Source.Schema) when every source is a table source (parquet,
// json, csv, delta) rather than a block source: they must share one schema
// (a union by name, as Spark's unionByName of same-schema tables). ok
// reports whether it did.
func tableSources(cfg Config, o *query.Options) (ok bool, err error) {
	var schema *stream.Schema
	for _, spec := range cfg.Sources {
		switch spec.Format {
		case files.Parquet, files.JSON, files.CSV, "delta":
		default:
			return false, nil
		}
	}
	for _, spec := range cfg.Sources {
		src, err := newSource(spec, nil, cfg.ArchiveFS, cfg.Conf)
		if err != nil {
			return false, err
		}
		s := src.Schema()
		if schema == nil {
			schema = &s
			continue
		}
		if !sameColumns(*schema, s) {
			return false, errcode.New(errcode.InvalidArgument, "", "read sources of one schema (the same column names and types)",
				"--source %s has the schema %s, the first source %s", spec, s, *schema)
		}
	}
	if schema == nil {
		return false, nil
	}
	for range cfg.Sources {
		o.Schemas = append(o.Schemas, *schema)
	}
	return true, nil
}

// sameColumns reports whether two schemas have the same column names and
// types, in any order (nullability aside).
func sameColumns(a, b stream.Schema) bool {
	if len(a.Fields) != len(b.Fields) {
		return false
	}
	for _, f := range a.Fields {
		g := b.Field(f.Name)
		if g == nil || g.Type != f.Type {
			return false
		}
	}
	return true
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// SourceLocation splits a --source URI into its location (without the query
// string) and its options (the query string).
func SourceLocation(uri string) (location, options string) {
	loc, opts, _ := strings.Cut(uri, "?")
	if u, err := url.Parse(loc); err == nil && u.Scheme != "" {
		u.RawQuery, u.Fragment = "", ""
		loc = u.String()
	}
	return loc, opts
}

// tableLocation is the table path as the shape records it: absolute, so
// that a restart from another working directory is the same location.
func tableLocation(p string) string {
	if strings.Contains(p, "://") && !strings.HasPrefix(p, "file:") {
		return p
	}
	p = strings.TrimPrefix(strings.TrimPrefix(p, "file://"), "file:")
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

func (c *compiled) buildShape(cfg Config) shape.Shape {
	qc, spec := c.q, c.q.Spec
	s := shape.Shape{From: qc.From, Projection: qc.Projection, Columns: qc.Columns, Keys: spec.GroupBy,
		OutputMode: spec.Mode.String(), OutputSchema: c.outputSchema().String(),
		Sink: shape.Sink{Format: "delta", Location: tableLocation(cfg.Table)}, Trigger: TriggerString(cfg.Trigger)}
	if c.agg != nil {
		spec = c.agg.Spec()
		s.StateSchema = c.agg.Schema().String()
	}
	if c.sess != nil {
		sp := c.sess.Spec()
		s.StateSchema = c.sess.Schema().String()
		s.Window = &shape.Window{Column: sp.Column, Gap: sp.GapText()}
	}
	if ss, err := ParseSinkSpec(cfg.Sink); err == nil {
		s.Sink = shape.Sink{Format: ss.Format, Location: ss.Path}
	}
	for _, src := range c.sources {
		loc, opts := SourceLocation(src.URI)
		s.Sources = append(s.Sources, shape.Source{Name: src.Name, Provider: src.Format, Location: loc, Options: opts})
	}
	if qc.Where != nil {
		s.Filter = qc.Where.String()
	}
	if w := spec.Window; w != nil {
		s.Window = &shape.Window{Column: w.Column, Size: query.FormatInterval(w.Size)}
		if w.Slide != 0 && w.Slide != w.Size {
			s.Window.Slide = query.FormatInterval(w.Slide)
		}
	}
	if col, d, ok := spec.Watermark(); ok {
		s.Watermark = &shape.Watermark{Column: col, DelayUs: d.Microseconds()}
	} else if col, d, ok := qc.Watermark(); ok {
		s.Watermark = &shape.Watermark{Column: col, DelayUs: d.Microseconds()}
	}
	s.Aggregates = aggregateTexts(spec)
	if len(qc.Steps) > 1 || c.globalLimit() {
		// A plan of several steps records each operator with the
		// stateless steps before it (shape version 3 when it has to).
		var ops []shape.Operator
		var input []string
		for i, st := range qc.Steps {
			op, ok := stepShape(c.steps[i])
			if !ok {
				input = append(input, st.String())
				continue
			}
			op.Input = input
			ops = append(ops, op)
			input = nil
		}
		s = s.WithOperators(ops)
	}
	return s
}

// stepShape is the shape of a plan step's stateful operator (an
// aggregation or a session window aggregation, maybe wrapped); ok is false
// for a stateless step.
func stepShape(op stream.Operator) (shape.Operator, bool) {
	if _, ok := op.(*limit.Operator); ok {
		return shape.Operator{Kind: shape.KindGlobalLimit, Keys: []string{}, Aggregates: []string{}, StateSchema: limit.Schema().String()}, true
	}
	if a := firstAgg(op); a != nil {
		o := shape.Operator{Kind: shape.KindAggregate, Keys: append([]string{}, a.Spec().GroupBy...), Aggregates: aggregateTexts(a.Spec()),
			StateSchema: a.Schema().String()}
		if w := a.Spec().Window; w != nil {
			o.Window = &shape.Window{Column: w.Column, Size: query.FormatInterval(w.Size)}
			if w.Slide != 0 && w.Slide != w.Size {
				o.Window.Slide = query.FormatInterval(w.Slide)
			}
		}
		return o, true
	}
	inner := op
	if f, ok := filter.Unwrap(op); ok {
		inner = f.Inner
	}
	if sw, ok := inner.(*session.Operator); ok {
		sp := sw.Spec()
		return shape.Operator{Kind: shape.KindAggregate, Keys: append([]string{}, sp.GroupBy...),
			Aggregates: aggregateTexts(agg.Spec{Aggregates: sp.Aggregates}), StateSchema: sw.Schema().String(),
			Window: &shape.Window{Column: sp.Column, Gap: sp.GapText()}}, true
	}
	return shape.Operator{}, false
}

// aggregateTexts are an aggregation's aggregates as the shape records them.
func aggregateTexts(spec agg.Spec) []string {
	var out []string
	for _, a := range spec.Aggregates {
		col := a.Column
		if col == "" {
			col = "*"
		}
		name := a.As
		if name == "" {
			if a.Column == "" {
				name = "count"
			} else {
				name = a.Kind.String() + "_" + a.Column
			}
		}
		out = append(out, a.Kind.String()+"("+col+") as "+name)
	}
	return out
}

// AdoptStateFormat keeps the state format of a checkpoint written before
// the newest (agg.StateFormat1: a long avg sum, no null BIGINT key): when
// the checkpoint's recorded query shape names that format's state schema,
// q's operator and shape are rebuilt in it, so the restart is not refused
// as a changed state schema. It reads the checkpoint (Build reads
// nothing): Run calls it after probing the storage, plan before planning.
// A shape that cannot be read is left to the engine, which reports it.
func AdoptStateFormat(cfg Config, q *engine.Query, opts engine.Options) error {
	if q.Shape == nil || opts.FS == nil {
		return nil
	}
	rec, err := shape.ReadLatest(opts.FS, opts.CheckpointDir)
	if err != nil || rec == nil || rec.Shape.StateSchema == q.Shape.StateSchema {
		return nil
	}
	// Only a plan of the one aggregation is rebuilt (buildShape records
	// that one): a plan with more operators (a deduplication before it)
	// would lose them from its shape, and the restart rules would no
	// longer see an operator added or removed.
	if len(q.Shape.OperatorList()) != 1 || len(rec.Shape.OperatorList()) != 1 {
		return nil
	}
	// The first aggregation: the one Operator, or the first stage's.
	slot := &q.Operator
	if *slot == nil {
		for i := range q.Stages {
			if firstAgg(q.Stages[i].Operator) != nil {
				slot = &q.Stages[i].Operator
				break
			}
		}
	}
	inner := firstAgg(*slot)
	if inner == nil {
		return nil
	}
	spec, ok := agg.ForRecordedState(inner.Spec(), rec.Shape.StateSchema)
	if !ok || spec.StateFormat == inner.Spec().StateFormat {
		return nil
	}
	c, err := CompileQuery(cfg)
	if err != nil {
		return err
	}
	a, err := agg.New(spec)
	if err != nil {
		return err
	}
	c.setFirst(a)
	c.shape = c.buildShape(cfg)
	*slot, q.Shape = c.op, &c.shape
	return nil
}

// firstAgg is the aggregation op is or wraps, nil if none.
func firstAgg(op stream.Operator) *agg.Operator {
	if a, ok := op.(*agg.Operator); ok {
		return a
	}
	if f, ok := filter.Unwrap(op); ok {
		a, _ := f.Inner.(*agg.Operator)
		return a
	}
	return nil
}

// withRetractions rebuilds the operator for input with retractions (a
// source that retracts rows of a reorganised chain).
func (c *compiled) withRetractions(cfg Config) error {
	if c.sess != nil {
		return errcode.New(session.CodeRetractionUnsupported, "",
			"read the source without retractions (e.g. with confirmations instead of reorg=retract)",
			"%s (%s): a source retracts rows (reorg=retract), which a session window cannot undo: a retracted row may split a session, and the state keeps one aggregate per session, not its rows",
			session.OperatorName, c.sess)
	}
	if c.agg == nil {
		return nil // the engine refuses a retracting source of a query with no operator
	}
	spec := c.agg.Spec()
	spec.Retractions = true
	a, err := agg.New(spec)
	if err != nil {
		return err
	}
	c.setFirst(a)
	c.shape = c.buildShape(cfg)
	return nil
}
