package delta

import (
	"context"
	"sync"

	"github.com/ethstream/ethstream/errcode"
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
	if n == 0 {
		return ctx.Err()
	}
	workers = max(1, min(workers, n))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		rows []sinkRow
		err  error
	}
	done := make([]chan result, n)
	for i := range done {
		done[i] = make(chan result, 1)
	}
	ahead := make(chan struct{}, 2*workers)
	free := make(chan []sinkRow, 2*workers+workers)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var buf []sinkRow
				select {
				case buf = <-free:
				default:
				}
				rows, err := read(i, buf[:0])
				done[i] <- result{rows, err}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(next)
		for i := range n {
			select {
			case ahead <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var err error
	for i := range n {
		if err = ctx.Err(); err != nil {
			break
		}
		var r result
		select {
		case r = <-done[i]:
		case <-ctx.Done():
			r.err = ctx.Err()
		}
		if err = r.err; err != nil {
			break
		}
		err = use(r.rows)
		<-ahead
		select {
		case free <- r.rows:
		default:
		}
		if err != nil {
			break
		}
	}
	cancel()
	wg.Wait()
	return err
}
