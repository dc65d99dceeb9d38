package delta

import (
	"context"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/readahead"
)

// SinkRow is one row of a table with the sink's schema (SinkSchema). The
// window bounds are microseconds since the epoch, UTC. A null value reads
// as its type's zero value and sets HasNull.
type SinkRow struct {
	WindowStart, WindowEnd int64
	Source, Miner          string
	Count                  int64
	HasNull                bool
}

// SinkRows calls fn for every live row of a table with the sink's schema
// and no partition columns, in file path order, like Rows but decoding the
// five leaf columns straight into a SinkRow: no map or reflection per row,
// so a scan of millions of rows costs little CPU and constant memory. Any
// other table is DELTA_SCHEMA_MISMATCH (read it with Rows).
func (s *Snapshot) SinkRows(ctx context.Context, fn func(SinkRow) error) error {
	if !sameShape(s.Schema, SinkSchema()) || len(s.Metadata.PartitionColumns) > 0 {
		return errcode.New(CodeSchemaMismatch, s.table.root, "read this table with a generic reader (ethstream table show)",
			"table does not have the sink's schema (window struct, source, miner, count; unpartitioned)")
	}
	return s.sinkRows(ctx, func(r *sinkRow) error {
		return fn(SinkRow{WindowStart: r.WS, WindowEnd: r.WE, Source: r.Source, Miner: r.Miner, Count: r.Count, HasNull: r.nulls != 0})
	})
}

// readAhead reads items 0..n-1 with read on up to workers goroutines, at
// most 2*workers items ahead of use, and calls use with each item's rows in
// order on the calling goroutine. Buffers use is done with are handed back
// to read. The first error (or ctx's) stops the scan.
func readAhead(ctx context.Context, n, workers int, read func(i int, buf []sinkRow) ([]sinkRow, error), use func([]sinkRow) error) error {
	workers = max(1, min(workers, n))
	free := make(chan []sinkRow, 3*workers)
	return readahead.Map(ctx, n, workers, 2*workers, func() func(context.Context, int) ([]sinkRow, error) {
		return func(_ context.Context, i int) ([]sinkRow, error) {
			var buf []sinkRow
			select {
			case buf = <-free:
			default:
			}
			return read(i, buf[:0])
		}
	}, func(_ int, rows []sinkRow) error {
		err := use(rows)
		select {
		case free <- rows:
		default:
		}
		return err
	})
}
