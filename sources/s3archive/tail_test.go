package s3archive

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/parquet-go/parquet-go"
)

func TestTailNeed(t *testing.T) {
	const size, footer, gap = 1000, 900, 50
	for _, c := range []struct {
		name string
		rs   []byteRange
		want int64
	}{
		{"no ranges: the footer", nil, 100},
		{"the last range touches the footer", []byteRange{{0, 10}, {700, 900}}, 300},
		{"the last range within the gap", []byteRange{{0, 10}, {700, 850}}, 300},
		{"the last range past the gap", []byteRange{{0, 10}, {700, 849}}, 100},
		{"only the last range: coalesced ones lie more than gap apart", []byteRange{{0, 600}, {651, 880}}, 349},
	} {
		if got := tailNeed(c.rs, size, footer, gap); got != c.want {
			t.Errorf("%s: tailNeed(%v) = %d, want %d", c.name, c.rs, got, c.want)
		}
	}
}

func TestTailModelNext(t *testing.T) {
	var m tailModel
	if got := m.next(footerPrefetch); got != footerPrefetch {
		t.Fatalf("before any file: %d, want the default %d", got, footerPrefetch)
	}
	for _, c := range []struct{ need, want int64 }{
		{64 << 10, 64<<10 + 4<<10 + 4<<10},
		{100, minTail},
		{4 << 20, maxTail},
	} {
		m.observe(c.need)
		if got := m.next(footerPrefetch); got != c.want {
			t.Errorf("after a file that needed %d: %d, want %d", c.need, got, c.want)
		}
	}
}

// TestLearnedTail decodes a sequence of files through one S3-shaped store
// whose tail is learned: every file decodes to its rows from the ranges
// fetched (none read outside them), each file's first read is the tail the
// files before it needed, a file laid out like the one before reads its
// footer and the projected chunks near it in that one read, and a file
// whose footer outgrew the guess (far more row groups) is still read.
func TestLearnedTail(t *testing.T) {
	root := t.TempDir()
	type file struct {
		name  string
		n     int
		group int64
	}
	files := []file{
		{"first: the default tail", 4000, 700},
		{"the same layout: the learned tail", 4000, 700},
		{"one small row group", 100, 700},
		{"many row groups: the footer outgrows the guess", 4000, 25},
		{"the first layout again", 4000, 700},
		{"and again: the learned tail", 4000, 700},
	}
	cols := []string{ethblock.ColBlockTS, ethblock.ColMiner, ethblock.ColNumber}
	m := &metrics{}
	var tails tailModel
	shape := s3ReadShape
	shape.tails = &tails
	rec := &recordingStore{store: shapedStore{&localStore{fs: vfs.Default, root: root, m: m}, shape}}
	for i, f := range files {
		t.Run(f.name, func(t *testing.T) {
			path := dayPath(root, day0.AddDate(0, 0, i), 0)
			bs := genBlocks(int64(1+i*10_000), f.n, day0.AddDate(0, 0, i))
			writeEra(t, path, "modern", bs, parquet.MaxRowsPerRowGroup(f.group))
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			size := info.Size()
			guess := min(size, tails.next(footerPrefetch))
			rec.ranges = nil
			m.uncached.Store(0)
			d, err := decodeFile(t.Context(), rec, fileURI(path), size, blockCols(cols), m)
			if err != nil {
				t.Fatal(err)
			}
			var got []block
			for _, b := range d.batches {
				got = append(got, batchRows(b)...)
			}
			blocksEqual(t, got, project(expected("modern", bs), cols))
			if n := m.uncached.Load(); n != 0 {
				t.Fatalf("%d reads outside the fetched ranges", n)
			}
			if rec.ranges[0] != (byteRange{size - guess, size}) {
				t.Fatalf("first read %v, want the guessed tail [%d,%d)", rec.ranges[0], size-guess, size)
			}
			// The layout, read independently of the source: what the
			// file's own tail would have had to hold.
			need, chunks := layoutNeed(t, path, size, cols)
			footerMissed := guess < footerLen(t, path, size)
			if footerMissed != (f.group == 25) {
				t.Fatalf("guess %d missed the footer: %v", guess, footerMissed)
			}
			if i == 1 || i == 5 {
				// Laid out as the file before: the tail covers all it
				// needs and little more, and the other chunks take a
				// read each.
				if guess < need || guess > need+need/8+8<<10 {
					t.Fatalf("tail %d, the file needs %d", guess, need)
				}
				if want := 1 + chunks; len(rec.ranges) != want {
					t.Fatalf("%d reads %v, want %d (the tail and %d coalesced ranges before it)", len(rec.ranges), rec.ranges, want, chunks)
				}
			}
		})
	}
}

// layoutNeed is what a file's tail must hold in the S3 shape (its footer
// and the coalesced ranges of cols within coalesceGap of it), and how many
// coalesced ranges lie before that.
func layoutNeed(t *testing.T, path string, size int64, cols []string) (need int64, before int) {
	t.Helper()
	chunks := fileChunks(t, path, size)
	var rs []byteRange
	for _, c := range blockCols(cols) {
		rs = append(rs, chunks[c.fileName()]...)
	}
	from := size - footerLen(t, path, size)
	rs = coalesce(rs, coalesceGap)
	for len(rs) > 0 && rs[len(rs)-1].end+coalesceGap >= from {
		from = rs[len(rs)-1].off
		rs = rs[:len(rs)-1]
	}
	return size - from, len(rs)
}

// footerLen is the size of a Parquet file's footer with its length and
// magic.
func footerLen(t *testing.T, path string, size int64) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(binary.LittleEndian.Uint32(b[size-8:])) + 8
}
