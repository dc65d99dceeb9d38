package s3archive

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/parquet-go/parquet-go"
)

// recordingStore records every range read.
type recordingStore struct {
	store
	mu     sync.Mutex
	ranges []byteRange
}

func (r *recordingStore) open(ctx context.Context, uri string) (objectReader, error) {
	o, err := r.store.open(ctx, uri)
	if err != nil {
		return nil, err
	}
	return recordingObject{o, r}, nil
}

type recordingObject struct {
	objectReader
	r *recordingStore
}

func (o recordingObject) readRange(ctx context.Context, off, n int64, buf []byte) ([]byte, error) {
	o.r.mu.Lock()
	o.r.ranges = append(o.r.ranges, byteRange{off, off + n})
	o.r.mu.Unlock()
	return o.objectReader.readRange(ctx, off, n, buf)
}

// shapedStore is a store read in another store's shape (the local files of
// a test read as if over S3).
type shapedStore struct {
	store
	shape readShape
}

func (s shapedStore) readShape() readShape { return s.shape }

// TestRangedReadsBoundUnprojectedBytes decodes a multi-row-group file with
// several projections and checks every byte range fetched after the
// speculative footer read against the file's column chunk layout, in the
// read shape of file:// and of S3: every projected byte is fetched once,
// unprojected ones only in holes of at most the shape's gap between
// projected chunks.
func TestRangedReadsBoundUnprojectedBytes(t *testing.T) {
	root := t.TempDir()
	path := dayPath(root, day0, 0)
	bs := genBlocks(1, 4000, day0)
	writeEra(t, path, "modern", bs, parquet.MaxRowsPerRowGroup(700))
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size := info.Size()
	chunks := fileChunks(t, path, size)
	for _, c := range []struct {
		name  string
		shape readShape
		cols  []string
	}{
		{"file", localReadShape, []string{ethblock.ColBlockTS, ethblock.ColMiner}},
		{"file", localReadShape, ethblock.Columns},
		{"file", localReadShape, []string{ethblock.ColGasUsed}},
		{"s3", s3ReadShape, []string{ethblock.ColBlockTS, ethblock.ColMiner}},
		{"s3", s3ReadShape, ethblock.Columns},
		{"s3", s3ReadShape, []string{ethblock.ColGasUsed}},
	} {
		cols, shape := c.cols, c.shape
		t.Run(c.name+fmt.Sprint(cols), func(t *testing.T) {
			m := &metrics{}
			rec := &recordingStore{store: shapedStore{&localStore{fs: vfs.Default, root: root, m: m}, shape}}
			f, err := decodeFile(t.Context(), rec, fileURI(path), size, blockCols(cols), m)
			if err != nil {
				t.Fatal(err)
			}
			if f.rows != int64(len(bs)) || len(f.batches) != 6 {
				t.Fatalf("%d rows in %d batches", f.rows, len(f.batches))
			}
			if m.uncached.Load() != 0 {
				t.Fatalf("%d reads outside the prefetched ranges", m.uncached.Load())
			}
			want := map[string]bool{}
			var projected int64
			for _, c := range cols {
				want[blockCols([]string{c})[0].fileName()] = true
				for _, r := range chunks[blockCols([]string{c})[0].fileName()] {
					projected += r.end - r.off
				}
			}
			footerStart := size - min(size, shape.tail)
			if rec.ranges[0] != (byteRange{footerStart, size}) {
				t.Fatalf("first read %v, want the footer [%d,%d)", rec.ranges[0], footerStart, size)
			}
			// Each range after the tail starts and ends on projected bytes,
			// and the unprojected bytes inside it are holes of at most
			// the shape's gap between projected chunks.
			var fetched, fetchedProjected int64
			for _, r := range rec.ranges[1:] {
				fetched += r.end - r.off
				var in []byteRange
				for name, rs := range chunks {
					for _, c := range rs {
						if want[name] && r.off < c.end && c.off < r.end {
							in = append(in, byteRange{max(c.off, r.off), min(c.end, r.end)})
						}
					}
				}
				in = coalesce(in, 0)
				if len(in) == 0 || in[0].off != r.off || in[len(in)-1].end != r.end {
					t.Fatalf("range %v does not start and end on projected chunks (%v)", r, in)
				}
				for i, c := range in {
					fetchedProjected += c.end - c.off
					if i > 0 && c.off-in[i-1].end > shape.gap {
						t.Fatalf("range %v spans a %d-byte hole of unprojected columns, more than %d", r, c.off-in[i-1].end, shape.gap)
					}
				}
			}
			// Everything projected outside the footer tail was fetched, nothing more.
			var projectedBeforeTail int64
			for _, c := range cols {
				for _, r := range chunks[blockCols([]string{c})[0].fileName()] {
					projectedBeforeTail += max(0, min(r.end, footerStart)-r.off)
				}
			}
			if fetchedProjected != projectedBeforeTail {
				t.Fatalf("fetched %d projected bytes after the footer; projected chunks hold %d (%d before the tail)", fetchedProjected, projected, projectedBeforeTail)
			}
			t.Logf("%v: %d reads, %d+%d of %d bytes (%.1f%%)", cols, len(rec.ranges), size-footerStart, fetched, size,
				100*float64(size-footerStart+fetched)/float64(size))
		})
	}
}

// fileChunks is the layout of the Parquet file at path, read independently
// of the source: its column chunks' byte ranges by archive column.
func fileChunks(t *testing.T, path string, size int64) map[string][]byteRange {
	t.Helper()
	osf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer osf.Close()
	pf, err := parquet.OpenFile(osf, size)
	if err != nil {
		t.Fatal(err)
	}
	chunks := map[string][]byteRange{}
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			name := c.MetaData.PathInSchema[0]
			chunks[name] = append(chunks[name], chunkRange(&c.MetaData))
		}
	}
	return chunks
}

func TestCoalesce(t *testing.T) {
	in := func() []byteRange {
		return []byteRange{{50, 60}, {0, 10}, {10, 20}, {30, 40}, {35, 45}, {5, 5}, {80, 90}}
	}
	for _, c := range []struct {
		gap  int64
		want []byteRange
	}{
		{0, []byteRange{{0, 20}, {30, 45}, {50, 60}, {80, 90}}},
		{5, []byteRange{{0, 20}, {30, 60}, {80, 90}}},
		{10, []byteRange{{0, 60}, {80, 90}}},
		{20, []byteRange{{0, 90}}},
	} {
		if got := coalesce(in(), c.gap); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("coalesce(gap %d) = %v, want %v", c.gap, got, c.want)
		}
	}
}
