package delta

import (
	"context"
	"runtime"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/readahead"
	"github.com/ethstream/ethstream/stream"
)

// Scan calls fn with the live rows of one of the sink's tables (unpartitioned,
// columns of the types the sink writes), one engine batch per data file, in
// file path order: the window struct as the columns window_start and
// window_end, every other column under its name, nulls as invalid values.
// Columns are decoded straight into the batch (no map or reflection per
// row), so a scan of millions of rows costs little CPU, and files are decoded
// on GOMAXPROCS goroutines a few files ahead of fn, which runs on the calling
// goroutine; fn must not keep the batch. Any other table is
// DELTA_SCHEMA_MISMATCH (read it with Rows).
func (s *Snapshot) Scan(ctx context.Context, fn func(*stream.Batch) error) error {
	l, err := s.scanLayout()
	if err != nil {
		return err
	}
	return s.scanRows(ctx, l, func(rs *rowSet) error { return fn(rs.batch()) })
}

// scanLayout is the layout Scan and Show read the table with.
func (s *Snapshot) scanLayout() (*outLayout, error) {
	if len(s.Metadata.PartitionColumns) > 0 {
		return nil, errcode.New(CodeSchemaMismatch, s.table.root, "read this table with a generic reader (ethstream table show)",
			"table is partitioned, which the sink's tables never are")
	}
	l, err := tableLayout(s.Schema)
	if err != nil {
		return nil, errcode.Wrap(err, CodeSchemaMismatch, s.table.root, "read this table with a generic reader (ethstream table show)",
			"table does not have a schema the sink writes")
	}
	return l, nil
}

// scanRows decodes every live file with layout l, in path order.
func (s *Snapshot) scanRows(ctx context.Context, l *outLayout, fn func(*rowSet) error) error {
	files := s.Files()
	if err := s.checkFiles(files); err != nil {
		return err
	}
	return readAhead(ctx, len(files), runtime.GOMAXPROCS(0), func(i int) (*rowSet, error) {
		p := s.table.filePath(files[i].Path)
		rs, err := readDataFile(s.table.fs, p, l)
		if err != nil {
			return nil, dataFileError(err, p, "restore the file from a backup", "read data file")
		}
		return rs, nil
	}, fn)
}

// readAhead reads items 0..n-1 with read on up to workers goroutines, at
// most 2*workers items ahead of use, and calls use with each item in order
// on the calling goroutine. The first error (or ctx's) stops the scan.
func readAhead[T any](ctx context.Context, n, workers int, read func(i int) (T, error), use func(T) error) error {
	workers = max(1, min(workers, n))
	return readahead.Map(ctx, n, workers, 2*workers, func() func(context.Context, int) (T, error) {
		return func(_ context.Context, i int) (T, error) { return read(i) }
	}, func(_ int, v T) error { return use(v) })
}
