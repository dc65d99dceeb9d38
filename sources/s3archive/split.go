package s3archive

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/internal/readahead"
	"github.com/ethstream/ethstream/stream"
)

// Reading fewer files than workers, by row group. readFiles hands a worker
// a whole file, and emits a file's row groups once all are decoded: over a
// batch of one large file (a day of the transactions table: 319 MB, 11 row
// groups of 131k rows) one worker decoded every row group while the engine
// waited, then the engine processed them while the workers idled. Here
// every file is opened (footer; over S3 the projected chunks fetched)
// first, then its row groups are the workers' items, each emitted as soon
// as it and those before it are decoded: the row groups decode on every
// worker, alongside the engine's processing of the ones before them (from
// a local file each worker reads its row group's chunks as it decodes
// them: openAll). What is emitted, and in what order, is the same: each
// non-empty row group once, in log order then row-group order.
//
// Not with skipUnreadable: a file skipped there is skipped whole, and a
// damaged row group would be met after the ones before it were emitted.
// (Without it, an unreadable file fails the batch, and the engine drops
// what the failed batch was fed.)

// splitByRowGroup reports whether readFiles reads files by row group:
// fewer files than the source has workers, which a file each would leave
// idle.
func (s *Source) splitByRowGroup(files int) bool {
	return files < s.parall && !s.opts.SkipUnreadable
}

// groupItem is one row group of a file, or (group -1) a file without a
// non-empty row group, or (err set) a file that failed to open; last marks
// a file's last item.
type groupItem struct {
	file, group int
	last        bool
	err         error
}

// readRowGroups is readFiles for splitByRowGroup: it opens every file
// concurrently, then decodes their row groups on the workers, emitting
// them in order. A file that failed to open fails the batch where its
// rows would have come, after the files before it (as readFiles).
func (s *Source) readRowGroups(ctx context.Context, files []logEntry, pool *fetchPool, cols *columnar.Pool, emit func(*stream.Batch) error) error {
	opened, errs := s.openAll(ctx, files, pool)
	defer func() {
		for _, of := range opened {
			if of != nil {
				of.close()
			}
		}
	}()
	var items []groupItem
	for i, of := range opened {
		if errs[i] != nil {
			items = append(items, groupItem{file: i, group: -1, err: errs[i]})
			break
		}
		n := len(items)
		for g, rg := range of.f.RowGroups() {
			if rg.NumRows() > 0 {
				items = append(items, groupItem{file: i, group: g})
			}
		}
		if len(items) == n {
			items = append(items, groupItem{file: i, group: -1})
		}
		items[len(items)-1].last = true
	}
	rows := make([]int64, len(files))
	// A row group in flight per worker, and the one being emitted: a
	// decoded row group is megabytes (a transactions one, 4 columns of
	// 131k rows, ~5 MB), where a decoded daily blocks file is kilobytes.
	// Decoding is CPU alone (the chunks are in memory, or in a local
	// file's page cache): workers past the cores only share them, each
	// row group decoding slower, the first (which the engine waits for)
	// among them.
	workers := min(s.parall, runtime.GOMAXPROCS(0))
	return readahead.Map(ctx, len(items), workers, workers+1, func() func(context.Context, int) (*stream.Batch, error) {
		// A worker's own decoders (their dictionaries and scratch are
		// theirs) and intern table, per file.
		intern := make(map[string]string, 1024)
		decs := map[int]*columnar.File{}
		return func(ctx context.Context, i int) (_ *stream.Batch, err error) {
			it := items[i]
			if it.group < 0 {
				return nil, it.err
			}
			of := opened[it.file]
			start := time.Now()
			defer func() { s.m.decodeNanos.Add(int64(time.Since(start))) }()
			defer func() {
				if err != nil {
					s.sizes.Delete(of.uri) // as readFile: the listed size may be stale
				}
			}()
			defer recoverUnreadable(&err, of.uri)
			dec := decs[it.file]
			if dec == nil {
				if len(intern) > maxInterned {
					clear(intern)
				}
				if dec, err = columnar.Open(of.f, fieldsOf(s.cols), intern); err != nil {
					return nil, unreadable(err, of.uri, "unsupported archive schema")
				}
				dec.UsePool(cols)
				decs[it.file] = dec
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			rg, err := dec.DecodeRowGroup(it.group)
			if err != nil {
				return nil, readErr(ctx, err, of.uri, "decode row group %d", it.group)
			}
			return rg.Batch, nil
		}
	}, func(i int, b *stream.Batch) error {
		it := items[i]
		if b != nil {
			rows[it.file] += int64(b.Len)
			if err := emit(b); err != nil {
				return err
			}
			// emit does not retain b (stream.Source).
			cols.Put(b)
		}
		if it.last {
			s.m.filesRead.Add(1)
			s.m.rowsRead.Add(rows[it.file])
			// Every row group of the file is decoded: its chunks go.
			return opened[it.file].close()
		}
		return nil
	})
}

// openAll opens every file (openFile) concurrently: opened[i] is file i,
// or errs[i] why it is not.
func (s *Source) openAll(ctx context.Context, files []logEntry, pool *fetchPool) (opened []*openedFile, errs []error) {
	opened, errs = make([]*openedFile, len(files)), make([]error, len(files))
	// A local file's chunks are not fetched up front: its one goroutine
	// read them (a day of transactions, 16.7 MB, in ~12 ms) before any
	// row group decoded, and into buffers the decoder then copied from.
	// The workers read each row group's pages from the file as they
	// decode it, into the decoder's own buffers. Over S3 each read is a
	// round trip: a file's chunks are fetched at once, as readFile does.
	fetch := !s.st.readShape().serial
	var wg sync.WaitGroup
	for i, e := range files {
		wg.Go(func() {
			size, err := s.sizeOf(ctx, e.Path)
			if err == nil {
				// Timed per file, as decodeFileWith is: decodeMs sums the
				// workers' time, not a batch's wall time. The intern table
				// of this plan is unused: each worker decodes with a plan
				// and table of its own.
				start := time.Now()
				opened[i], _, err = openFile(ctx, s.st, pool, nil, e.Path, size, s.cols, s.m, nil, fetch)
				s.m.decodeNanos.Add(int64(time.Since(start)))
			}
			if err != nil {
				// As readFile: the listed size may be stale (the object
				// was replaced); the batch's re-run asks again.
				s.sizes.Delete(e.Path)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return opened, errs
}
