package streamtest

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// appendRows appends rows [lo, hi) of src to dst, which is empty or has
// src's columns (names and types, in order). Values are copied: dst never
// aliases src, so a receiver may keep dst after src's producer reuses it.
func appendRows(dst, src *stream.Batch, lo, hi int) error {
	if len(dst.Columns) == 0 && dst.Len == 0 {
		for _, c := range src.Columns {
			dst.Columns = append(dst.Columns, stream.Column{Name: c.Name, Type: c.Type})
		}
	}
	if err := dst.AppendRange(src, lo, hi); err != nil {
		return fmt.Errorf("rows: %w", err)
	}
	return nil
}

// project returns rows [lo, hi) of b with the named columns in that order
// (every column when names is nil), as a copy.
func project(b *stream.Batch, names []string, lo, hi int) (*stream.Batch, error) {
	src := b
	if names != nil {
		src = &stream.Batch{Len: b.Len, Signs: b.Signs}
		for _, n := range names {
			c := b.Column(n)
			if c == nil {
				return nil, fmt.Errorf("no column %q", n)
			}
			src.Columns = append(src.Columns, *c)
		}
	}
	out := &stream.Batch{}
	if err := appendRows(out, src, lo, hi); err != nil {
		return nil, err
	}
	return out, nil
}

// Cell renders the value of column c at row i as Value does, but a
// timestamp in RFC 3339 (UTC).
func Cell(c *stream.Column, i int) string {
	if c.Type == stream.Timestamp && !c.IsNull(i) {
		return time.UnixMicro(c.Int64s[i]).UTC().Format(time.RFC3339Nano)
	}
	return Value(c, i)
}

// Value renders the value of column c at row i: "null" for a null, numbers
// as Go prints them (a timestamp as its microseconds), strings as they are.
func Value(c *stream.Column, i int) string {
	if c.IsNull(i) {
		return "null"
	}
	if c.Type.Kind() == stream.Array {
		// [e1, e2, null]: each element rendered by these rules.
		parts := make([]string, 0, c.ArrayLen(i))
		for e := c.Offsets[i]; e < c.Offsets[i+1]; e++ {
			parts = append(parts, Value(c.Elems, int(e)))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	switch c.Type {
	case stream.String:
		return c.Strings[i]
	case stream.Float64:
		return fmt.Sprint(c.Float64s[i])
	default:
		return fmt.Sprint(c.Int64s[i])
	}
}

// Values is row i of b as a map from column name to its Go value (int64,
// float64 or string; nil for a null): what a test compares across two
// sources that must produce the same row.
func Values(b *stream.Batch, i int) map[string]any {
	v := make(map[string]any, len(b.Columns))
	for c := range b.Columns {
		col := &b.Columns[c]
		switch {
		case col.IsNull(i):
			v[col.Name] = nil
		case col.Type.Kind() == stream.Array:
			v[col.Name] = Value(col, i)
		case col.Type == stream.String:
			v[col.Name] = col.Strings[i]
		case col.Type == stream.Float64:
			v[col.Name] = col.Float64s[i]
		default:
			v[col.Name] = col.Int64s[i]
		}
	}
	return v
}

// Row renders row i of b as "name=value ..." in column order, prefixed by
// "-" for a retraction.
func Row(b *stream.Batch, i int) string {
	var s strings.Builder
	if b.Sign(i) < 0 {
		s.WriteString("- ")
	}
	for c := range b.Columns {
		if c > 0 {
			s.WriteByte(' ')
		}
		s.WriteString(b.Columns[c].Name)
		s.WriteByte('=')
		s.WriteString(Cell(&b.Columns[c], i))
	}
	return s.String()
}

var tempName = regexp.MustCompile(`\.[0-9a-f]{16}\.tmp\b`)

// ScrubTemp replaces the random part of durable's temp file names
// (".<16 hex digits>.tmp") in s by ".RAND.tmp", so that an error naming
// one prints the same in every run.
func ScrubTemp(s string) string { return tempName.ReplaceAllString(s, ".RAND.tmp") }
