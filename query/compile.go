package query

import (
	"slices"
	"strings"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

// FromAll is the FROM name that reads every source: the union by name of
// all --source streams with the literal source column.
const FromAll = "blocks"

// Options are what a query runs with besides its text: Spark's
// withWatermark and outputMode, and the input it resolves against.
type Options struct {
	// WatermarkColumn and WatermarkDelay are withWatermark(column, delay);
	// an empty column means no watermark.
	WatermarkColumn string
	WatermarkDelay  time.Duration
	// OutputMode is outputMode: update (default), append or complete.
	OutputMode string
	// Sources are the names of the query's input streams, in --source order.
	Sources []string
	// ColumnType resolves an input column (block columns); the literal
	// source column is always a string.
	ColumnType func(name string) (stream.Type, bool)
	// Columns lists the input columns, for errors.
	Columns []string
}

// Compiled is a query resolved against its input: what the engine runs.
type Compiled struct {
	// Text is the canonical text of the query.
	Text string
	// Sources are the indexes (into Options.Sources) of the sources read.
	Sources []int
	From    string
	Spec    agg.Spec
	// Where is the compiled filter, nil without WHERE.
	Where *filter.Predicate
	// Columns are the input columns read (the projection handed to the
	// sources), with stream.ColSource when the query uses it.
	Columns []string
	// Projection is the SELECT list, canonical, in the order written.
	Projection []string
}

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
	d, err := ParseInterval(strings.TrimSpace(delay))
	if err != nil {
		return "", 0, err
	}
	if d <= 0 {
		return "", 0, errcode.New(errcode.InvalidArgument, "", "use a positive delay", "--with-watermark %q: the delay must be positive", s)
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
	return resolve(src, sel, o)
}

func resolve(src string, sel *Select, o Options) (*Compiled, error) {
	c := &Compiled{From: sel.From}
	colType := func(name string) (stream.Type, bool) {
		if name == stream.ColSource {
			return stream.String, true
		}
		return o.ColumnType(name)
	}
	unresolved := func(pos int, name string) error {
		e := errcode.New(CodeUnresolvedColumn, "", "use one of: "+strings.Join(append(slices.Clone(o.Columns), stream.ColSource), ", "),
			"column %q does not exist", name)
		e.Msg += " (at " + position(src, pos) + ")"
		return e
	}
	// FROM.
	if sel.From == FromAll {
		for i := range o.Sources {
			c.Sources = append(c.Sources, i)
		}
	} else {
		i := slices.Index(o.Sources, sel.From)
		if i < 0 {
			e := errcode.New(CodeUnresolvedColumn, "", "FROM blocks (every source) or FROM one of the --source names: "+strings.Join(o.Sources, ", "),
				"FROM %s: no source has that name", sel.From)
			e.Msg += " (at " + position(src, sel.FromPos) + ")"
			return nil, e
		}
		c.Sources = []int{i}
	}
	// GROUP BY.
	spec := agg.Spec{ColumnTypes: map[string]stream.Type{}}
	var window *WindowCall
	if len(sel.GroupBy) == 0 {
		return nil, invalidQuery(src, len(src), "add GROUP BY window(block_ts, '5 minutes') and/or columns",
			"an aggregation without GROUP BY keeps one row forever; ethstream runs grouped aggregations only")
	}
	for _, g := range sel.GroupBy {
		if g.Window != nil {
			if g.Window.Ref {
				return nil, invalidQuery(src, g.Pos, "group by window(block_ts, '5 minutes')", "GROUP BY window needs its arguments")
			}
			if window != nil {
				return nil, unsupported(src, g.Pos, "more than one window() in GROUP BY")
			}
			window = g.Window
			continue
		}
		t, ok := colType(g.Col)
		if !ok {
			return nil, unresolved(g.Pos, g.Col)
		}
		if slices.Contains(spec.GroupBy, g.Col) {
			return nil, invalidQuery(src, g.Pos, "name each group key once", "GROUP BY %s appears twice", g.Col)
		}
		spec.GroupBy = append(spec.GroupBy, g.Col)
		spec.ColumnTypes[g.Col] = t
	}
	if window != nil {
		t, ok := colType(window.Col)
		if !ok {
			return nil, unresolved(window.Pos, window.Col)
		}
		if t != stream.Timestamp {
			return nil, invalidQuery(src, window.Pos, "window over a timestamp column such as block_ts",
				"window(%s, ...): %s is %s, not a timestamp", window.Col, window.Col, t)
		}
		size, err := ParseInterval(window.Size)
		if err != nil {
			return nil, err
		}
		w := &agg.Window{Column: window.Col, Size: size}
		if window.Slide != "" {
			if w.Slide, err = ParseInterval(window.Slide); err != nil {
				return nil, err
			}
			if w.Slide > size || w.Slide <= 0 {
				return nil, invalidQuery(src, window.Pos, "use a slide between 1 microsecond and the window size",
					"window slide %s is not within (0, %s]", window.Slide, window.Size)
			}
		}
		if size <= 0 {
			return nil, invalidQuery(src, window.Pos, "use a positive window size", "window size %q is zero", window.Size)
		}
		spec.Window = w
		spec.ColumnTypes[window.Col] = t
	}
	// SELECT.
	selectedKeys := map[string]bool{}
	names := map[string]bool{}
	claim := func(pos int, name string) error {
		if names[name] {
			return invalidQuery(src, pos, "give each output column its own name with AS", "output column %q appears twice", name)
		}
		names[name] = true
		return nil
	}
	for _, it := range sel.Items {
		c.Projection = append(c.Projection, it.String())
		switch {
		case it.Window != nil:
			if window == nil {
				return nil, invalidQuery(src, it.Pos, "add the window to GROUP BY", "SELECT %s without GROUP BY window(...)", it.Window)
			}
			if !it.Window.Ref && it.Window.String() != window.String() {
				return nil, invalidQuery(src, it.Pos, "select the window of GROUP BY ("+window.String()+"), or just window",
					"SELECT %s differs from GROUP BY %s", it.Window, window)
			}
			if it.As != "" && it.As != "window" {
				return nil, unsupported(src, it.Pos, "renaming the window (it is the table's window struct; leave AS window or no alias)")
			}
			if err := claim(it.Pos, "window"); err != nil {
				return nil, err
			}
			selectedKeys["window"] = true
		case it.Agg != "":
			a := agg.Aggregate{Column: it.AggCol, As: it.As}
			switch it.Agg {
			case "count":
				a.Kind = agg.Count
			case "sum":
				a.Kind = agg.Sum
			case "min":
				a.Kind = agg.Min
			case "max":
				a.Kind = agg.Max
			case "avg":
				a.Kind = agg.Avg
			}
			if a.Column != "" {
				t, ok := colType(a.Column)
				if !ok {
					return nil, unresolved(it.Pos, a.Column)
				}
				if it.Agg != "count" {
					switch {
					case t == stream.String:
						return nil, invalidQuery(src, it.Pos, "aggregate a numeric column", "%s(%s): %s is a string", it.Agg, a.Column, a.Column)
					case t == stream.Timestamp && (a.Kind == agg.Sum || a.Kind == agg.Avg):
						return nil, invalidQuery(src, it.Pos, "use min or max of a timestamp", "%s(%s): %s is a timestamp", it.Agg, a.Column, a.Column)
					}
				}
				spec.ColumnTypes[a.Column] = t
			}
			name := a.As
			if name == "" {
				if a.Column == "" {
					name = "count"
				} else {
					name = it.Agg + "_" + a.Column
				}
			}
			if !validColumnName(name) {
				return nil, invalidQuery(src, it.Pos, "use an alias of letters, digits and underscores", "output column name %q is not valid in a Delta table", name)
			}
			if err := claim(it.Pos, name); err != nil {
				return nil, err
			}
			spec.Aggregates = append(spec.Aggregates, a)
		default:
			if it.Col == "window" {
				return nil, invalidQuery(src, it.Pos, "group by window(...)", "window is not a column")
			}
			if _, ok := colType(it.Col); !ok {
				return nil, unresolved(it.Pos, it.Col)
			}
			if !slices.Contains(spec.GroupBy, it.Col) {
				return nil, invalidQuery(src, it.Pos, "add "+it.Col+" to GROUP BY or aggregate it",
					"%s is neither in GROUP BY nor aggregated", it.Col)
			}
			if it.As != "" && it.As != it.Col {
				return nil, unsupported(src, it.Pos, "renaming a group key (AS "+it.As+")")
			}
			if err := claim(it.Pos, it.Col); err != nil {
				return nil, err
			}
			selectedKeys[it.Col] = true
		}
	}
	if len(spec.Aggregates) == 0 {
		return nil, invalidQuery(src, 0, "add count(*), sum(col), min, max or avg", "the query has no aggregate")
	}
	if window != nil && !selectedKeys["window"] {
		return nil, invalidQuery(src, window.Pos, "select window too", "GROUP BY window(...) but the window is not selected: the table could not tell windows apart")
	}
	for _, g := range spec.GroupBy {
		if !selectedKeys[g] {
			return nil, invalidQuery(src, 0, "select "+g+" too", "GROUP BY %s but %s is not selected: the table could not tell its groups apart", g, g)
		}
	}
	// WHERE.
	if sel.Where != nil {
		p, err := filter.Compile(sel.Where, colType)
		if err != nil {
			return nil, err
		}
		c.Where = p
		for _, col := range p.Columns() {
			if t, ok := colType(col); ok {
				spec.ColumnTypes[col] = t
			}
		}
	}
	// Options.
	mode, err := ParseOutputMode(o.OutputMode)
	if err != nil {
		return nil, err
	}
	spec.Mode = mode
	if o.WatermarkColumn != "" {
		if window == nil {
			return nil, errcode.New(CodeUnsupported, "", "add GROUP BY window(...) or drop the watermark",
				"withWatermark(%s) without a window: the watermark would close nothing", o.WatermarkColumn)
		}
		if o.WatermarkColumn != window.Col {
			return nil, errcode.New(CodeUnsupported, "", "set the watermark on the window's event-time column",
				"withWatermark(%s): ethstream evicts state by the window's event time; a watermark on another column is not supported", o.WatermarkColumn)
		}
		spec.WatermarkDelay = o.WatermarkDelay
	}
	// Projection: the columns read, source column included when used.
	c.Columns = spec.InputColumns()
	if c.Where != nil {
		for _, col := range c.Where.Columns() {
			if !slices.Contains(c.Columns, col) {
				c.Columns = append(c.Columns, col)
			}
		}
	}
	c.Spec = spec
	c.Text = canonical(sel)
	return c, nil
}

// validColumnName refuses the characters Delta does not allow in column
// names without column mapping.
func validColumnName(s string) bool {
	return s != "" && !strings.ContainsAny(s, " ,;{}()\n\t=")
}

// canonical renders a parsed query in one normal form (lowercase keywords,
// single spaces, fully parenthesised WHERE).
func canonical(sel *Select) string {
	var b strings.Builder
	b.WriteString("select ")
	for i, it := range sel.Items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(it.String())
	}
	b.WriteString(" from " + sel.From)
	if sel.Where != nil {
		b.WriteString(" where " + sel.Where.String())
	}
	if len(sel.GroupBy) > 0 {
		b.WriteString(" group by ")
		for i, g := range sel.GroupBy {
			if i > 0 {
				b.WriteString(", ")
			}
			if g.Window != nil {
				b.WriteString(g.Window.String())
			} else {
				b.WriteString(g.Col)
			}
		}
	}
	return b.String()
}
