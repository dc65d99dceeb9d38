// Package console is Spark's console sink: it prints each batch's output as
// a table to a writer, for examples, tests and debugging. It writes no
// table and records nothing, so a batch re-run after a crash prints again
// (Spark's console sink is not fault-tolerant either).
package console

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Sink prints batches to W. Its methods are safe for concurrent use.
type Sink struct {
	W io.Writer
	// Sorted prints each batch's rows in ascending order of their printed
	// cells (Spark prints them in arrival order), so that the output of a
	// plan whose row order is unspecified is reproducible.
	Sorted bool
	// SkipEmpty prints nothing for a batch without rows.
	SkipEmpty bool

	mu sync.Mutex
}

var _ stream.Sink = (*Sink)(nil)

// Open does nothing: there is no output to check.
func (s *Sink) Open(context.Context, stream.SinkEnv) error { return nil }

// Description is Spark's name for the sink.
func (s *Sink) Description() string { return "ConsoleSink" }

// Close does nothing.
func (s *Sink) Close() error { return nil }

// AddBatch prints batch batchID as Spark's console sink does: a header
// with the batch id, then the rows as a table (a retraction marked "-").
func (s *Sink) AddBatch(_ context.Context, batchID int64, out *stream.Batch) (stream.SinkProgress, error) {
	prog := stream.SinkProgress{Description: s.Description(), NumOutputRows: int64(out.Len)}
	if s.SkipEmpty && out.Len == 0 {
		return prog, nil
	}
	header := make([]string, len(out.Columns))
	for i, c := range out.Columns {
		header[i] = c.Name
	}
	rows := make([][]string, out.Len)
	for r := range rows {
		row := make([]string, len(out.Columns))
		for i := range out.Columns {
			row[i] = cell(&out.Columns[i], r)
		}
		if out.Sign(r) < 0 {
			row[0] = "-" + row[0]
		}
		rows[r] = row
	}
	if s.Sorted {
		slices.SortFunc(rows, func(a, b []string) int { return slices.Compare(a, b) })
	}
	var b strings.Builder
	rule := "-------------------------------------------\n"
	fmt.Fprintf(&b, "%sBatch: %d\n%s", rule, batchID, rule)
	b.WriteString(table(header, rows))
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := io.WriteString(s.W, b.String()); err != nil {
		return prog, fmt.Errorf("console sink: %w", err)
	}
	return prog, nil
}

// cell renders row r of c as Spark's show() does; timestamps in UTC.
func cell(c *stream.Column, r int) string {
	if c.IsNull(r) {
		return "NULL"
	}
	switch c.Type.Kind() {
	case stream.Float64:
		return strconv.FormatFloat(c.Float64s[r], 'g', -1, 64)
	case stream.Float32:
		return strconv.FormatFloat(c.Float64s[r], 'g', -1, 32)
	case stream.String:
		return c.Strings[r]
	case stream.Binary:
		return fmt.Sprintf("[% X]", c.Strings[r])
	case stream.Decimal:
		return c.Decimals[r].Text(c.Type.Scale())
	case stream.Boolean:
		return strconv.FormatBool(c.Int64s[r] != 0)
	case stream.Date:
		return time.Unix(c.Int64s[r]*86400, 0).UTC().Format(time.DateOnly)
	case stream.Timestamp, stream.TimestampNTZ:
		return time.UnixMicro(c.Int64s[r]).UTC().Format("2006-01-02 15:04:05")
	}
	return strconv.FormatInt(c.Int64s[r], 10)
}

// table renders Spark's show() table: a rule, the header, a rule, the rows
// right-aligned, a rule.
func table(header []string, rows [][]string) string {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = len(h)
	}
	for _, row := range rows {
		for i, v := range row {
			width[i] = max(width[i], len(v))
		}
	}
	var b strings.Builder
	rule := func() {
		for _, w := range width {
			b.WriteString("+" + strings.Repeat("-", w))
		}
		b.WriteString("+\n")
	}
	line := func(cells []string) {
		for i, v := range cells {
			b.WriteString("|" + strings.Repeat(" ", width[i]-len(v)) + v)
		}
		b.WriteString("|\n")
	}
	rule()
	line(header)
	rule()
	for _, row := range rows {
		line(row)
	}
	rule()
	return b.String()
}
