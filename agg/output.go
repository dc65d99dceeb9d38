package agg

import (
	"fmt"
	"math"
	"slices"

	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// output builds the batch Finish hands the sink: window_start, window_end
// (windowed plans), the group columns, then one column per aggregate.
type output struct {
	p     *plan
	b     *stream.Batch
	gBase int // index of the first group column
	aBase int // index of the first aggregate column
}

// newOutput starts an output with room for capacity rows, in the columns
// of spare (a batch an earlier output built, which nothing holds any more:
// Recycle) when not nil.
func newOutput(p *plan, capacity int, spare *stream.Batch) *output {
	o := &output{p: p, b: &stream.Batch{}}
	var old []stream.Column
	if spare != nil {
		old, o.b.Columns = spare.Columns, spare.Columns[:0]
	}
	add := func(name string, t stream.Type) {
		i := len(o.b.Columns)
		if i >= len(old) {
			o.b.Columns = append(o.b.Columns, stream.MakeColumn(name, t, 0, capacity))
			return
		}
		c := old[i]
		c.Int64s, c.Float64s, c.Decimals = reuse(c.Int64s, capacity), reuse(c.Float64s, capacity), reuse(c.Decimals, capacity)
		c.Strings = reuse(c.Strings, capacity) // cleared by Recycle
		c.Valid, c.Dict = nil, nil
		o.b.Columns = append(o.b.Columns, c)
	}
	if p.window {
		add(ColWindowStart, stream.Timestamp)
		add(ColWindowEnd, stream.Timestamp)
	}
	o.gBase = len(o.b.Columns)
	for k, g := range p.spec.GroupBy {
		add(g, p.groupType[k])
	}
	o.aBase = len(o.b.Columns)
	for _, a := range p.aggs {
		if !a.hidden {
			add(a.As, a.out)
		}
	}
	return o
}

// reuse returns s emptied, with room for n elements (nil stays nil: the
// column's storage is another).
func reuse[T any](s []T, n int) []T {
	if s == nil {
		return nil
	}
	return slices.Grow(s[:0], n)
}

// OutputSchema is the schema of the rows Finish emits: window_start and
// window_end (windowed plans), the group columns, then the aggregates. The key
// is the window and the group columns; aggregates are nullable when the
// aggregate can see only nulls (sum, min, max of a nullable column).
func (o *Operator) OutputSchema() stream.Schema {
	p := o.p
	var s stream.Schema
	if p.window {
		s.Fields = append(s.Fields, stream.Field{Name: ColWindowStart, Type: stream.Timestamp}, stream.Field{Name: ColWindowEnd, Type: stream.Timestamp})
		s.Key = append(s.Key, ColWindowStart, ColWindowEnd)
	}
	for k, g := range p.spec.GroupBy {
		s.Fields = append(s.Fields, stream.Field{Name: g, Type: p.groupType[k], Nullable: true})
		s.Key = append(s.Key, g)
	}
	for _, a := range p.aggs {
		if !a.hidden {
			s.Fields = append(s.Fields, stream.Field{Name: a.As, Type: a.out, Nullable: a.hasNonNull()})
		}
	}
	return s
}

// appendAggs appends the aggregate values of one row; a sum/min/max that saw
// only nulls is a null.
func (o *output) appendAggs(vals []aggVal) {
	o.appendAggValues(vals)
	o.b.Len++
	if o.b.Signs != nil {
		o.b.Signs = append(o.b.Signs, 1)
	}
}

// appendAggValues appends the aggregate values of row o.b.Len, which the
// caller then counts.
func (o *output) appendAggValues(vals []aggVal) {
	for a := range o.p.aggs {
		ra := &o.p.aggs[a]
		if ra.hidden { // hidden aggregates come last
			break
		}
		c := &o.b.Columns[o.aBase+a]
		switch {
		case ra.sketch != nil:
			c.Int64s = append(c.Int64s, sketchEstimate(ra, vals[a].hll))
		case ra.Kind == Avg && ra.out.Kind() == stream.Decimal:
			var avg stream.Dec128
			if vals[a].nn > 0 {
				avg = avgOfDecimal(vals[a].d, vals[a].nn, ra.in, ra.out)
			}
			c.Decimals = append(c.Decimals, avg)
		case ra.out.Kind() == stream.Decimal:
			c.Decimals = append(c.Decimals, vals[a].d)
		case ra.Kind == Avg:
			sum := vals[a].f
			if ra.acc().Storage() != stream.Float64 {
				sum = float64(vals[a].i)
			}
			avg := 0.0
			if vals[a].nn > 0 {
				avg = sum / float64(vals[a].nn)
			}
			c.Float64s = append(c.Float64s, avg)
		case ra.out.Storage() == stream.Float64:
			c.Float64s = append(c.Float64s, vals[a].f)
		default:
			c.Int64s = append(c.Int64s, vals[a].i)
		}
		o.setNull(c, ra.hasNonNull() && vals[a].nn == 0)
	}
}

// appendDeletion appends partial entry e as a row with Sign -1: its group
// was emptied by retractions and leaves the sink. Only the key columns are
// meaningful; the aggregates are zero (count) or null.
func (o *output) appendDeletion(pt *partial, e int, zero []aggVal) {
	clear(zero)
	o.appendEntry(pt, e, zero)
	if o.b.Signs == nil {
		o.b.Signs = make([]int8, o.b.Len, o.b.Len+8)
		for i := range o.b.Signs {
			o.b.Signs[i] = 1
		}
	}
	o.b.Signs[o.b.Len-1] = -1
}

// appendEntry appends partial entry e with its merged values.
func (o *output) appendEntry(pt *partial, e int, vals []aggVal) {
	cols := o.b.Columns
	if o.p.window {
		s := pt.start[e]
		cols[0].Int64s = append(cols[0].Int64s, s)
		cols[1].Int64s = append(cols[1].Int64s, s+o.p.sizeUs)
	}
	for k := range o.p.groupType {
		c := &cols[o.gBase+k]
		if o.p.strKey(k) {
			o.appendKey(c, k, pt.keyStr(k, e), 0)
		} else {
			o.appendKey(c, k, "", pt.gInt[k][e])
		}
		o.setNull(c, pt.gNull[k][e])
	}
	o.appendAggs(vals)
}

// setNull records whether the value just appended to column c (row
// o.b.Len) is null; Valid stays nil while no value is.
func (o *output) setNull(c *stream.Column, null bool) {
	if null && c.Valid == nil {
		c.Valid = make([]bool, o.b.Len, o.b.Len+1)
		for i := range c.Valid {
			c.Valid[i] = true
		}
	}
	if c.Valid != nil {
		c.Valid = append(c.Valid, !null)
	}
}

// appendStored appends a row read from the store (append and complete modes).
func (o *output) appendStored(key []byte, vals []aggVal) error {
	fields, err := state.DecodeKey(o.p.schema.Key, key)
	if err != nil {
		return fmt.Errorf("decode aggregation state key: %w", err)
	}
	if len(fields) != len(o.p.schema.Key) {
		return fmt.Errorf("decode aggregation state key: %d fields, want %d", len(fields), len(o.p.schema.Key))
	}
	cols := o.b.Columns
	j := 0
	if o.p.window {
		end, ok1 := fields[0].(int64)
		start, ok2 := fields[1].(int64)
		if !ok1 || !ok2 {
			return fmt.Errorf("decode aggregation state key: window is %T, %T", fields[0], fields[1])
		}
		cols[0].Int64s = append(cols[0].Int64s, start)
		cols[1].Int64s = append(cols[1].Int64s, end)
		j = 2
	}
	for k := range o.p.groupType {
		c := &cols[o.gBase+k]
		f := fields[j+k]
		if o.p.strKey(k) {
			s, ok := f.(string)
			if !ok && f != nil {
				return fmt.Errorf("decode aggregation state key: %s is %T", c.Name, f)
			}
			o.appendKey(c, k, s, 0)
			o.setNull(c, f == nil)
		} else if o.p.floatKey(k) {
			v, ok := f.(float64)
			if !ok && f != nil {
				return fmt.Errorf("decode aggregation state key: %s is %T", c.Name, f)
			}
			c.Float64s = append(c.Float64s, v)
			o.setNull(c, f == nil)
		} else {
			v, ok := f.(int64)
			if !ok && (f != nil || !o.p.nullKey(k)) {
				return fmt.Errorf("decode aggregation state key: %s is %T", c.Name, f)
			}
			c.Int64s = append(c.Int64s, v)
			o.setNull(c, f == nil)
		}
	}
	o.appendAggs(vals)
	return nil
}

// appendKey appends group column k's value to c, in c's storage: s for a
// column of the strings path (plan.strKey), i otherwise.
func (o *output) appendKey(c *stream.Column, k int, s string, i int64) {
	switch {
	case o.p.groupType[k].Kind() == stream.Decimal:
		var d stream.Dec128
		if len(s) == 16 {
			d = stream.Dec128FromKey([]byte(s))
		}
		c.Decimals = append(c.Decimals, d)
	case o.p.strKey(k):
		c.Strings = append(c.Strings, s)
	case o.p.floatKey(k):
		c.Float64s = append(c.Float64s, math.Float64frombits(uint64(i)))
	default:
		c.Int64s = append(c.Int64s, i)
	}
}
