package flow

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/stream"
)

// SortKey is one key of Sort: a column, descending or not, nulls first or
// last (Spark's default: NULLS FIRST ascending, NULLS LAST descending).
type SortKey struct {
	Column     string
	Desc       bool
	NullsFirst bool
}

// Sort orders the rows of each batch by keys (Spark's sort of a complete
// mode aggregation's output, which is the whole result each batch). Equal
// rows keep their order.
func (q *Query) Sort(keys ...SortKey) *Query {
	if len(keys) == 0 {
		return q.fail(invalid("sort by no column"))
	}
	return q.Transform(&sortStep{keys: keys})
}

// Limit keeps the first n rows of each batch (Spark's limit of a complete
// mode aggregation's output, which is the whole result each batch).
func (q *Query) Limit(n int64) *Query {
	if n < 0 {
		return q.fail(invalid("limit %d: the row count must not be negative", n))
	}
	return q.Transform(&limitStep{n: n})
}

// sortStep is Sort's stateless step.
type sortStep struct{ keys []SortKey }

var _ stream.Transform = (*sortStep)(nil)

func (s *sortStep) String() string {
	parts := make([]string, len(s.keys))
	for i, k := range s.keys {
		parts[i] = k.Column
		if k.Desc {
			parts[i] += " desc"
		}
		if k.NullsFirst {
			parts[i] += " nulls first"
		} else {
			parts[i] += " nulls last"
		}
	}
	return "order by " + strings.Join(parts, ", ")
}

// OutputSchema is in: a sort keeps the columns.
func (s *sortStep) OutputSchema(in stream.Schema) (stream.Schema, error) {
	for _, k := range s.keys {
		if in.Field(k.Column) == nil {
			return in, invalid("sort reads column %q, which the rows lack: %s", k.Column, in)
		}
	}
	return in, nil
}

// Apply returns in's rows in order.
func (s *sortStep) Apply(in *stream.Batch) (*stream.Batch, error) {
	cols := make([]*stream.Column, len(s.keys))
	for i, k := range s.keys {
		if cols[i] = in.Column(k.Column); cols[i] == nil {
			return nil, invalid("sort: no column %q in the rows", k.Column)
		}
	}
	idx := make([]int, in.Len)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		for i, k := range s.keys {
			if c := compareRows(cols[i], a, b, k.NullsFirst); c != 0 {
				if k.Desc && !cols[i].IsNull(a) && !cols[i].IsNull(b) {
					return -c
				}
				return c
			}
		}
		return 0
	})
	return in.Take(idx), nil
}

// compareRows orders rows a and b of c ascending, nulls where nullsFirst
// says (a null's place does not flip with a descending key).
func compareRows(c *stream.Column, a, b int, nullsFirst bool) int {
	na, nb := c.IsNull(a), c.IsNull(b)
	switch {
	case na && nb:
		return 0
	case na != nb:
		if na == nullsFirst {
			return -1
		}
		return 1
	}
	switch c.Type.Storage() {
	case stream.Decimal:
		return c.Decimals[a].Cmp(c.Decimals[b])
	case stream.Float64: // DOUBLE and FLOAT
		// Spark orders NaN above every other double.
		x, y := c.Float64s[a], c.Float64s[b]
		if x != x || y != y {
			return cmp.Compare(boolInt(x != x), boolInt(y != y))
		}
		return cmp.Compare(x, y)
	case stream.String: // STRING and BINARY: unsigned bytes, as Spark's
		return strings.Compare(c.Strings[a], c.Strings[b])
	}
	return cmp.Compare(c.Int64s[a], c.Int64s[b])
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// limitStep is Limit's stateless step.
type limitStep struct{ n int64 }

var _ stream.Transform = (*limitStep)(nil)

func (l *limitStep) String() string { return "limit " + strconv.FormatInt(l.n, 10) }

// OutputSchema is in.
func (l *limitStep) OutputSchema(in stream.Schema) (stream.Schema, error) { return in, nil }

// Apply returns the first n rows of in.
func (l *limitStep) Apply(in *stream.Batch) (*stream.Batch, error) {
	if int64(in.Len) <= l.n {
		return in, nil
	}
	idx := make([]int, l.n)
	for i := range idx {
		idx[i] = i
	}
	return in.Take(idx), nil
}
