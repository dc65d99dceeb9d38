package agg

import (
	"fmt"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// Buffers is the aggregation's aggregate functions one row and one group at
// a time, for an operator that forms its own groups (package session's
// session windows): the same functions, types, null rules, overflow rule
// and state value encoding as the grouped aggregation's, without its
// windows and batch-local hash table. It is immutable and safe for
// concurrent use; the Buffers it hands out are not.
type Buffers struct {
	p *plan
}

// Buffer is one group's aggregate values, as Buffers lays them out.
type Buffer []aggVal

// NewBuffers validates aggs over columns of the given types (state format
// 2: avg sums in a double) under the ANSI rule nonANSI selects. The names
// of the aggregates (As) must not collide with reserved, the group and
// window columns of the operator using them.
func NewBuffers(aggs []Aggregate, columnTypes map[string]stream.Type, nonANSI bool, reserved ...string) (*Buffers, error) {
	p := &plan{spec: Spec{Aggregates: aggs, ColumnTypes: columnTypes, NonANSI: nonANSI, Mode: Append}, format: StateFormat2}
	if len(aggs) == 0 {
		return nil, invalid("no aggregates")
	}
	used := claims{}
	for _, r := range reserved {
		if err := used.claim(r, "column"); err != nil {
			return nil, err
		}
	}
	if err := p.planAggregates(used); err != nil {
		return nil, err
	}
	if err := refuseSketches(p); err != nil {
		return nil, err
	}
	// A Buffer holds a long or a double: a DECIMAL's sum, min, max or avg
	// is refused here rather than read from the wrong storage.
	for _, a := range p.aggs {
		if a.Kind != Count && a.in.Kind() == stream.Decimal {
			return nil, errcode.New(CodeDatatypeMismatch, "", "count the DECIMAL column here, or aggregate it in a window() or grouped aggregation",
				"%s(%s): a session window's aggregates do not take DECIMAL columns", a.Kind, a.Column)
		}
	}
	return &Buffers{p: p}, nil
}

// Aggregates returns the aggregates with their output names settled.
func (b *Buffers) Aggregates() []Aggregate {
	out := make([]Aggregate, len(b.p.aggs))
	for i, a := range b.p.aggs {
		out[i] = a.Aggregate
	}
	return out
}

// New returns a buffer of no row: counts 0, the others null.
func (b *Buffers) New() Buffer { return make(Buffer, len(b.p.aggs)) }

// ValueFields is the state value layout of a buffer (agg's doc, State
// layout: per aggregate its running value, then <As>__nonnull for
// sum/min/max/avg).
func (b *Buffers) ValueFields() []state.Field {
	var fs []state.Field
	for _, a := range b.p.aggs {
		fs = append(fs, state.Field{Name: a.As, Type: a.acc()})
		if a.hasNonNull() {
			fs = append(fs, state.Field{Name: a.As + nonNullSuffix, Type: stream.Int64})
		}
	}
	return fs
}

// SpecText renders the aggregates as the state schema's spec text names
// them: "<kind>(<col>|*):<as>,...".
func (b *Buffers) SpecText() string {
	var s strings.Builder
	for i, a := range b.p.aggs {
		if i > 0 {
			s.WriteByte(',')
		}
		col := a.Column
		if col == "" {
			col = "*"
		}
		fmt.Fprintf(&s, "%s(%s):%s", a.Kind, col, a.As)
	}
	return s.String()
}

// InputColumns returns the input columns the aggregates read, in order,
// "" for count(*).
func (b *Buffers) InputColumns() []string {
	cols := make([]string, len(b.p.aggs))
	for i, a := range b.p.aggs {
		cols[i] = a.Column
	}
	return cols
}

// Resolve returns in's column of each aggregate (nil for count(*)),
// checked against the declared types.
func (b *Buffers) Resolve(in *stream.Batch) ([]*stream.Column, error) {
	cols := make([]*stream.Column, len(b.p.aggs))
	for i, a := range b.p.aggs {
		if a.Column == "" {
			continue
		}
		c := in.Column(a.Column)
		if c == nil {
			return nil, unresolved(a.Column)
		}
		if c.Type != a.in {
			return nil, mismatch(a.Column, c.Type, a.in)
		}
		cols[i] = c
	}
	return cols, nil
}

// Fold sets dst to the buffer of row i alone of the columns Resolve
// returned (dst must come from New; it is overwritten).
func (b *Buffers) Fold(dst Buffer, cols []*stream.Column, i int) {
	for a := range b.p.aggs {
		ra := &b.p.aggs[a]
		v := &dst[a]
		*v = aggVal{}
		c := cols[a]
		if ra.Kind == Count {
			if c == nil || !c.IsNull(i) {
				v.i = 1
			}
			continue
		}
		if c.IsNull(i) {
			continue
		}
		v.nn = 1
		switch {
		case c.Type.Storage() == stream.Float64:
			v.f = c.Float64s[i]
		case ra.acc().Storage() == stream.Float64:
			v.f = float64(c.Int64s[i])
		default:
			v.i = c.Int64s[i]
		}
	}
}

// Merge folds src into dst, as two groups of rows become one. It returns
// ARITHMETIC_OVERFLOW naming the aggregate when a long sum leaves BIGINT
// under ANSI (NewBuffers' nonANSI false); dst is then partly merged.
func (b *Buffers) Merge(dst, src Buffer) error {
	for a := range b.p.aggs {
		ra := &b.p.aggs[a]
		v, s := &dst[a], &src[a]
		switch {
		case ra.Kind == Count:
			if addOverflows(v.i, s.i) {
				return b.overflow(ra)
			}
			v.i += s.i
			continue
		case s.nn == 0:
			continue
		case ra.Kind == Sum || ra.Kind == Avg:
			if ra.acc().Storage() == stream.Float64 {
				v.f += s.f
			} else {
				if addOverflows(v.i, s.i) && !b.p.spec.NonANSI {
					return b.overflow(ra)
				}
				v.i += s.i
			}
		case ra.acc().Storage() == stream.Float64:
			if v.nn == 0 || (ra.Kind == Min && floatLess(s.f, v.f)) || (ra.Kind == Max && floatLess(v.f, s.f)) {
				v.f = s.f
			}
		default:
			if v.nn == 0 || (ra.Kind == Min && s.i < v.i) || (ra.Kind == Max && s.i > v.i) {
				v.i = s.i
			}
		}
		v.nn += s.nn
	}
	return nil
}

func (b *Buffers) overflow(ra *resolvedAgg) error {
	return errcode.New(CodeArithmeticOverflow, "", "sum a smaller column, or set spark.sql.ansi.enabled=false to wrap as Spark 3 did",
		"%s(%s) as %s: long overflow (the sum left BIGINT)", ra.Kind, ra.Column, ra.As)
}

// AppendValue appends buf in ValueFields' encoding.
func (b *Buffers) AppendValue(dst []byte, buf Buffer) []byte { return b.p.encodeValue(dst, buf) }

// DecodeValue reads a value AppendValue wrote into buf and returns the
// bytes after it.
func (b *Buffers) DecodeValue(val []byte, buf Buffer) ([]byte, error) {
	for a := range b.p.aggs {
		ra := &b.p.aggs[a]
		var ok bool
		if ra.acc().Storage() == stream.Float64 {
			if len(val) < 8 {
				return nil, b.p.badValue(a)
			}
			buf[a].f, val, ok = readFloat(val)
		} else {
			buf[a].i, val, ok = readVarint(val)
		}
		if !ok {
			return nil, b.p.badValue(a)
		}
		buf[a].nn = 0
		if ra.hasNonNull() {
			if buf[a].nn, val, ok = readVarint(val); !ok {
				return nil, b.p.badValue(a)
			}
		}
	}
	return val, nil
}

// OutputFields are the aggregates' output columns: As with the output type,
// nullable when the aggregate can see only nulls.
func (b *Buffers) OutputFields() []stream.Field {
	fs := make([]stream.Field, len(b.p.aggs))
	for i, a := range b.p.aggs {
		fs[i] = stream.Field{Name: a.As, Type: a.out, Nullable: a.hasNonNull()}
	}
	return fs
}

// AppendOutput appends buf's output values to out's columns from index
// first on (OutputFields' order) as row out.Len, which the caller then
// counts; a sum/min/max/avg of only nulls is a null.
func (b *Buffers) AppendOutput(out *stream.Batch, first int, buf Buffer) {
	o := &output{p: b.p, b: out, aBase: first}
	o.appendAggValues(buf)
}
