package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// The read path: what the engine does to each chunk a source emits before
// the rows enter the first operator (or, in a query without one, the
// sink). In order: the literal source column (stream.ColSource) when the
// query reads it; the event time of the rows the pushed-down predicate
// keeps (Query.PreWatermark) into the batch's max event time, which sets
// the next watermark; the WHERE (Query.Where), dropping the rows it does
// not keep. numInputRows counts every row read, as Spark counts the rows a
// source produced.
//
// The engine owns these steps so that nothing is wrapped around a source
// or an operator: a wrapper forwards only the optional interfaces it
// knows of, and each it forgot (stream.DataNotifier, stream.MoveChecker,
// stream.StateRecorder) silently turned a capability off.

// readPath is the per-query state of the read path; used by the driver's
// goroutine only.
type readPath struct {
	where, pre stream.Predicate
	eventTime  string // "" without a watermark
	// out, in a query with no stateful operator, collects the batch's rows
	// for the sink, projected on sel.
	sel []string
	out *stream.Batch
	// hint is the row count of the last batch collected: the next batch's
	// columns are made with that room, as consecutive batches of a stream
	// are alike in size, so that gathering its chunks copies each value
	// once instead of regrowing (a larger batch still grows; a smaller one
	// holds the unused room until the sink is done with it).
	hint int
	buf  stream.Batch // the kept rows of the last chunk
}

// chunk runs the read path over one chunk of source st: it records event
// times in ev and returns the rows for the operator (nil: none left).
func (r *readPath) chunk(st *srcState, withSrc bool, in *stream.Batch, ev *eventStats) (*stream.Batch, error) {
	if withSrc {
		in = st.withSourceColumn(in)
	}
	if r.eventTime != "" {
		if c := in.Column(r.eventTime); c != nil {
			var keep []bool
			if r.pre != nil && in.Len > 0 {
				k, err := r.pre.Keep(in)
				if err != nil {
					return nil, fmt.Errorf("evaluate the pushed-down filter %s: %w", r.pre, err)
				}
				keep = k
			}
			ev.add(c, keep)
		}
	}
	if r.where != nil && in.Len > 0 {
		keep, err := r.where.Keep(in)
		if err != nil {
			return nil, fmt.Errorf("evaluate the filter %s: %w", r.where, err)
		}
		in = keepRows(&r.buf, in, keep)
	}
	return in, nil
}

// collect appends in's rows, projected on the selected columns, to the
// batch's output (a query with no stateful operator).
func (r *readPath) collect(in *stream.Batch) error {
	if r.out == nil {
		r.out = &stream.Batch{}
	}
	return appendProjected(r.out, in, r.sel, r.hint)
}

// take returns the batch's collected output and starts the next.
func (r *readPath) take() *stream.Batch {
	out := r.out
	r.out = nil
	if out == nil {
		out = &stream.Batch{}
	}
	r.hint = out.Len
	return out
}

// endChunk drops the last chunk's references (strings) from the buffer.
func (r *readPath) endBatch() {
	for i := range r.buf.Columns {
		clear(r.buf.Columns[i].Strings)
		if d := r.buf.Columns[i].Dict; d != nil {
			d.Values = nil // the source's (FilterInto shares them)
		}
	}
}

// keepRows returns the rows of in that keep marks, in itself when all are
// kept; the result reuses buf's slices until the next call.
func keepRows(buf *stream.Batch, in *stream.Batch, keep []bool) *stream.Batch {
	n := 0
	for _, k := range keep {
		if k {
			n++
		}
	}
	if n == in.Len {
		return in
	}
	in.FilterInto(buf, keep)
	return buf
}

// appendProjected appends every row of in, the columns sel in that order,
// to out (whose columns, once set, are sel's, made with room for capacity
// rows); one range copy per column, not a row at a time.
func appendProjected(out, in *stream.Batch, sel []string, capacity int) error {
	if in.Len == 0 {
		return nil
	}
	if len(out.Columns) == 0 {
		capacity = max(capacity, in.Len)
		for _, name := range sel {
			c := in.Column(name)
			if c == nil {
				return fmt.Errorf("selected column %q is not in the rows read", name)
			}
			out.Columns = append(out.Columns, stream.MakeColumn(name, c.Type, 0, capacity))
		}
	}
	for i := range out.Columns {
		dst := &out.Columns[i]
		src := in.Column(dst.Name)
		if src == nil || src.Type != dst.Type {
			return fmt.Errorf("selected column %q is missing from a chunk or changed type", dst.Name)
		}
		if dst.Valid == nil && src.Valid != nil {
			// Valid once a chunk has one, even all true, as the row-at-a-time
			// gather left it.
			dst.Valid = make([]bool, out.Len, max(out.Len+in.Len, capacity))
			for j := range dst.Valid {
				dst.Valid[j] = true
			}
		}
		dst.AppendRange(src, 0, in.Len) // stream's kernel: every type's storage, nulls included
	}
	if in.Signs != nil || out.Signs != nil {
		for len(out.Signs) < out.Len {
			out.Signs = append(out.Signs, 1)
		}
		out.Signs = slices.Grow(out.Signs, in.Len)
		for r := 0; r < in.Len; r++ {
			out.Signs = append(out.Signs, in.Sign(r))
		}
	}
	out.Len += in.Len
	return nil
}

// outputSchema is the schema a query with no stateful operator hands its
// sink: the selected columns as the sources declare them (nullable when
// any source's is), no key (rows are appended).
func (q *Query) outputSchema() stream.Schema {
	var s stream.Schema
	for _, name := range q.selected() {
		f := stream.Field{Name: name, Type: stream.String}
		if name != stream.ColSource {
			for i, ns := range q.Sources {
				sc := ns.Source.Schema()
				sf := sc.Field(name)
				if sf == nil {
					continue
				}
				if i == 0 {
					f.Type = sf.Type
				}
				f.Nullable = f.Nullable || sf.Nullable
			}
		}
		s.Fields = append(s.Fields, f)
	}
	return s
}

// selected is what a query with no stateful operator outputs: Select, or
// every column read.
func (q *Query) selected() []string {
	if q.Select != nil {
		return q.Select
	}
	if q.Columns != nil {
		return q.Columns
	}
	var all []string
	for _, ns := range q.Sources {
		for _, f := range ns.Source.Schema().Fields {
			if !slices.Contains(all, f.Name) {
				all = append(all, f.Name)
			}
		}
	}
	return append(all, stream.ColSource)
}

// validateReadPath checks, before anything is read or written, that every
// column the query reads is a column of every source's declared schema
// (stream.Source.Schema), of one type across them (the watermark's a
// timestamp), and that a query with no stateful operator selects only
// columns it reads and has no source that retracts (an appended row
// cannot be taken back). A nil source (a plan from names alone) declares
// nothing and is skipped.
func (q *Query) validateReadPath() error {
	reads := slices.Clone(q.Columns)
	add := func(cols ...string) {
		for _, c := range cols {
			if !slices.Contains(reads, c) {
				reads = append(reads, c)
			}
		}
	}
	if q.Watermark != nil {
		add(q.Watermark.Column)
	}
	for _, p := range []stream.Predicate{q.Where, q.PreWatermark} {
		if p == nil {
			continue
		}
		if q.Columns != nil {
			for _, c := range p.Columns() {
				if !slices.Contains(q.Columns, c) {
					return errcode.New(errcode.InvalidArgument, "", "add the filter's columns to the query's columns",
						"the filter %s reads %q, which the query does not read", p, c)
				}
			}
		}
		add(p.Columns()...)
	}
	if len(q.operators()) == 0 {
		add(q.Select...)
	}
	types := map[string]stream.Type{}
	for _, ns := range q.Sources {
		if ns.Source == nil {
			continue // a plan from names alone
		}
		sc := ns.Source.Schema()
		for _, c := range reads {
			if c == stream.ColSource {
				continue
			}
			f := sc.Field(c)
			if f == nil {
				names := make([]string, len(sc.Fields))
				for i, f := range sc.Fields {
					names[i] = f.Name
				}
				return errcode.New(errcode.UnresolvedColumn, "", "read only the source's columns: "+strings.Join(names, ", "),
					"source %q (%s) has no column %q: its columns are %s", ns.Name, ns.Source.Description(), c, sc)
			}
			if t, ok := types[c]; ok && t != f.Type {
				return errcode.New(errcode.UnresolvedColumn, "", "read the column from sources that agree on its type",
					"column %q is %v in source %q and %v in another source", c, f.Type, ns.Name, t)
			}
			types[c] = f.Type
		}
	}
	if w := q.Watermark; w != nil {
		if t, ok := types[w.Column]; ok && t != stream.Timestamp {
			return errcode.New(errcode.InvalidArgument, "", "set the watermark on a timestamp column",
				"the event time %s is %v, not a timestamp", w.Column, t)
		}
	}
	if len(q.operators()) > 0 {
		return nil
	}
	if q.Columns != nil {
		for _, c := range q.Select {
			if !slices.Contains(q.Columns, c) {
				return errcode.New(errcode.InvalidArgument, "", "add the selected columns to the query's columns",
					"the query selects %q, which it does not read", c)
			}
		}
	}
	for _, ns := range q.Sources {
		if rs, ok := ns.Source.(stream.RetractingSource); ok && rs.Retracts() {
			return errcode.New(errcode.InvalidArgument, "", "aggregate the rows (an operator undoes a retraction), or read the source without retractions",
				"source %q may retract rows, and a query with no stateful operator appends its rows: a retraction could not be undone", ns.Name)
		}
	}
	return nil
}
