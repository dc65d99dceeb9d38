package s3archive

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// readAll reads (nil, end] of s and returns the rows, each batch's length
// and the source's file and row counters.
func readAll(t *testing.T, s *Source, end stream.Offset) (rows []block, lens []int, files, read string) {
	t.Helper()
	err := s.ReadBatch(t.Context(), nil, end, func(b *stream.Batch) error {
		if err := b.Validate(); err != nil {
			return err
		}
		rows = append(rows, batchRows(b)...)
		lens = append(lens, b.Len)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Metrics()
	return rows, lens, m["filesRead"], m["rowsRead"]
}

// TestRowGroupsReadAsFiles: a batch of fewer files than workers, read by
// row group on every worker (split.go), emits what one worker reading
// file by file emits: the same batches (one per non-empty row group, in
// file then row-group order) and rows as the oracle's, the same counters.
// Random eras, file counts, row counts (an empty file among them) and row
// group sizes.
func TestRowGroupsReadAsFiles(t *testing.T) {
	eras := []string{"modern", "int96", "decimal", "nanos", "seconds", "spark"}
	for seed := range 12 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		era := eras[rng.IntN(len(eras))]
		root := t.TempDir()
		var want []block
		nfiles := 1 + rng.IntN(4)
		for d := range nfiles {
			day := day0.AddDate(0, 0, d)
			n := rng.IntN(400)
			if seed == 3 && d == 0 {
				n = 0 // a file without rows: no batch, still a file read
			}
			bs := genBlocks(int64(1_000_000+d*1000), n, day)
			writeEra(t, dayPath(root, day, 0), era, bs, parquet.MaxRowsPerRowGroup(int64(1+rng.IntN(120))))
			want = append(want, expected(era, bs)...)
		}
		cols := ethblock.Columns
		if rng.IntN(2) == 0 {
			cols = []string{ethblock.ColMiner, ethblock.ColNumber, ethblock.ColGasUsed}
			want = project(want, cols)
		}
		fs := vfs.NewMem()
		one := openSource(t, Options{URI: fileURI(root), Parallelism: 1}, testEnv(t, fs, cols...))
		end, err := one.LatestOffset(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		split := openSource(t, Options{URI: fileURI(root), Parallelism: nfiles + 1 + rng.IntN(6)}, testEnv(t, fs, cols...))
		if !split.splitByRowGroup(nfiles) || one.splitByRowGroup(nfiles) {
			t.Fatalf("seed %d: %d files at parallelism %d and 1 do not take both paths", seed, nfiles, split.parall)
		}
		gotOne, lensOne, filesOne, rowsOne := readAll(t, one, end)
		gotSplit, lensSplit, filesSplit, rowsSplit := readAll(t, split, end)
		blocksEqual(t, gotOne, want)
		blocksEqual(t, gotSplit, want)
		if !reflect.DeepEqual(lensSplit, lensOne) || filesSplit != filesOne || rowsSplit != rowsOne {
			t.Fatalf("seed %d (%s, %d files): by row group batches %v, files %s, rows %s; by file %v, %s, %s",
				seed, era, nfiles, lensSplit, filesSplit, rowsSplit, lensOne, filesOne, rowsOne)
		}
	}
}

// TestRowGroupsBounded: a file of many row groups, read by row group,
// holds at most the window's row groups decoded: later row groups decode
// into the slices of those emitted before them, so that the file's
// columns are never all in memory at once (read whole, every row group's
// were, before the first was emitted).
func TestRowGroupsBounded(t *testing.T) {
	root := t.TempDir()
	const groups = 40
	writeEra(t, dayPath(root, day0, 0), "modern", genBlocks(1, groups*50, day0), parquet.MaxRowsPerRowGroup(50))
	s := openSource(t, Options{URI: fileURI(root), Parallelism: 2}, testEnv(t, vfs.NewMem(), ethblock.ColNumber))
	end, err := s.LatestOffset(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	arrays := map[*int64]bool{}
	n := 0
	err = s.ReadBatch(t.Context(), nil, end, func(b *stream.Batch) error {
		arrays[unsafe.SliceData(b.Columns[0].Int64s)] = true
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The window (workers + 1) decoded, one being emitted.
	if limit := s.parall + 2; n != groups || len(arrays) > limit {
		t.Fatalf("%d row groups emitted in %d distinct column arrays, want %d in at most %d", n, len(arrays), groups, limit)
	}
}

// TestRowGroupsFromLocalFileAsDecoded: read by row group, a local file's
// chunks are read by the workers as they decode them (ReadAt past the
// footer's range), not fetched before the first row group decodes; an
// S3-shaped store's are still fetched at once (no read outside them). Both
// emit the file's rows.
func TestRowGroupsFromLocalFileAsDecoded(t *testing.T) {
	root := t.TempDir()
	bs := genBlocks(2_000_000, 600, day0)
	writeEra(t, dayPath(root, day0, 0), "modern", bs, parquet.MaxRowsPerRowGroup(50))
	for _, c := range []struct {
		name     string
		shape    readShape
		uncached bool
	}{{"file", localReadShape, true}, {"s3", s3ReadShape, false}} {
		t.Run(c.name, func(t *testing.T) {
			s := openSource(t, Options{URI: fileURI(root), Parallelism: 4}, testEnv(t, vfs.NewMem(), ethblock.Columns...))
			s.st = shapedStore{s.st, c.shape}
			if !s.splitByRowGroup(1) {
				t.Fatal("one file at parallelism 4 is not read by row group")
			}
			end, err := s.LatestOffset(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _, _, _ := readAll(t, s, end)
			blocksEqual(t, got, expected("modern", bs))
			if n := s.m.uncached.Load(); (n > 0) != c.uncached {
				t.Fatalf("%d reads outside the fetched ranges, want them: %v", n, c.uncached)
			}
		})
	}
}

// TestRowGroupsLocalReadErrorMidFile: read by row group, a local file's
// pages are read by the workers as they decode them, after the file was
// opened; a read that fails there, in the middle of the file, fails the
// batch as ARCHIVE_FILE_UNREADABLE naming the file, after nothing but
// whole row groups before the failed one, in order. Read again once the
// disk answers, the batch emits every row.
func TestRowGroupsLocalReadErrorMidFile(t *testing.T) {
	root := t.TempDir()
	path := dayPath(root, day0, 0)
	const perGroup, groups, bad = 50, 12, 7
	bs := genBlocks(1, perGroup*groups, day0)
	writeEra(t, path, "modern", bs, parquet.MaxRowsPerRowGroup(perGroup))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	off := int64(-1)
	for _, c := range pf.Metadata().RowGroups[bad].Columns {
		if p := c.MetaData.PathInSchema; p[len(p)-1] == "number" {
			off, _ = columnar.ChunkRange(&c.MetaData)
		}
	}
	f.Close()
	if off < 0 {
		t.Fatal("no number column in the file")
	}
	// The chunk's first bytes are read at the open (its first page
	// header, checkBounds), then by the decode: the second read fails.
	inj := &failReadAt{off: off, nth: 2}
	s := openSource(t, Options{URI: fileURI(root), Parallelism: 4, FS: errorfs.Wrap(vfs.Default, inj)}, testEnv(t, vfs.NewMem(), ethblock.Columns...))
	if !s.splitByRowGroup(1) {
		t.Fatal("one file at parallelism 4 is not read by row group")
	}
	end, err := s.LatestOffset(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := expected("modern", bs)
	var got []block
	var lens []int
	err = s.ReadBatch(t.Context(), nil, end, func(b *stream.Batch) error {
		got, lens = append(got, batchRows(b)...), append(lens, b.Len)
		return nil
	})
	if inj.calls.Load() < 2 {
		t.Fatalf("the chunk at %d was read %d times: the decode did not read it from the file", off, inj.calls.Load())
	}
	var e *errcode.Error
	if !errcode.Is(err, ArchiveFileUnreadable) || !errors.As(err, &e) || e.Path != fileURI(path) {
		t.Fatalf("got %v, want %s naming %s", err, ArchiveFileUnreadable, fileURI(path))
	}
	// Row group bad is handed to a worker only once all but the window's
	// row groups before it were emitted: the failure comes mid-file.
	if len(lens) == 0 || len(lens) > bad || slices.ContainsFunc(lens, func(n int) bool { return n != perGroup }) {
		t.Fatalf("before the failed row group %d, batches of %v rows", bad, lens)
	}
	blocksEqual(t, got, want[:len(got)])
	blocksEqual(t, collect(t, s, nil, end), want)
}

// failReadAt fails the nth ReadAt at off (errorfs.ErrInjected).
type failReadAt struct {
	off   int64
	nth   int64
	calls atomic.Int64
}

func (f *failReadAt) String() string { return fmt.Sprintf("(fail ReadAt %d #%d)", f.off, f.nth) }

func (f *failReadAt) MaybeError(op errorfs.Op) error {
	if op.Kind == errorfs.OpFileReadAt && op.Offset == f.off && f.calls.Add(1) == f.nth {
		return errorfs.ErrInjected
	}
	return nil
}
