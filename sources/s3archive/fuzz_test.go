package s3archive

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ethstream/ethstream/errcode"
)

// memStore serves one object from memory.
type memStore struct{ data []byte }

func (s memStore) list(context.Context) ([]object, error) { return nil, nil }
func (s memStore) size(context.Context, string) (int64, error) {
	return int64(len(s.data)), nil
}
func (s memStore) open(context.Context, string) (objectReader, error) { return s, nil }
func (s memStore) readShape() readShape                               { return s3ReadShape }
func (s memStore) close() error                                       { return nil }
func (s memStore) readRange(_ context.Context, off, n int64, _ []byte) ([]byte, error) {
	if off < 0 || n < 0 || off+n > int64(len(s.data)) {
		return nil, fmt.Errorf("range [%d,%d) outside %d bytes", off, off+n, len(s.data))
	}
	return bytes.Clone(s.data[off : off+n]), nil
}

// FuzzDecodeFile feeds damaged Parquet files (from every era) to the decoder:
// it must return rows or ARCHIVE_FILE_UNREADABLE, never panic or hang.
func FuzzDecodeFile(f *testing.F) {
	dir := f.TempDir()
	for i, era := range eras {
		p := filepath.Join(dir, era+".parquet")
		writeEra(f, p, era, genBlocks(int64(100*i), 40, day0), parquet.MaxRowsPerRowGroup(16), parquet.PageBufferSize(256))
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint32(len(data)/2), byte(0xff))
		f.Add(data, uint32(len(data)-20), byte(1))
		f.Add(data, uint32(4), byte(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, at uint32, x byte) {
		decodeDamaged(t, data, at, x, "mem:///f.parquet", blockColumns())
	})
}

// decodeDamaged decodes data with the byte at at XORed by x: the file
// decodes into batches that validate, or fails with
// ARCHIVE_FILE_UNREADABLE, never a panic.
func decodeDamaged(t *testing.T, data []byte, at uint32, x byte, uri string, cols []Column) {
	if len(data) > 0 {
		data = bytes.Clone(data)
		data[int(at)%len(data)] ^= x
	}
	out, err := decodeFile(context.Background(), memStore{data}, uri, int64(len(data)), cols, &metrics{})
	if err != nil {
		if !errcode.Is(err, ArchiveFileUnreadable) {
			t.Fatalf("error without %s: %v", ArchiveFileUnreadable, err)
		}
		return
	}
	for _, b := range out.batches {
		if err := b.Validate(); err != nil {
			t.Fatalf("decoded an invalid batch: %v", err)
		}
	}
}

// FuzzDecodeMetadata sets one size or count of a valid file's metadata
// (row counts, chunk offsets and sizes, value counts) to a fuzzed value and
// re-encodes the footer, so every input reaches the decoder as well-formed
// metadata with a hostile number in it (a random byte flip rarely survives
// the footer's thrift decoding). The decoder must return rows or
// ARCHIVE_FILE_UNREADABLE, and never by way of a decoder panic: the bounds
// check refuses the number first.
func FuzzDecodeMetadata(f *testing.F) {
	files := map[string][]byte{}
	for _, era := range eras {
		files[era] = eraFile(f, era)
	}
	names := make([]string, 0, len(metadataEdits))
	for n := range metadataEdits {
		names = append(names, n)
	}
	slices.Sort(names)
	for i := range eras {
		for j := range names {
			for _, v := range []int64{1 << 62, -1, 1 << 31, 17} {
				f.Add(uint8(i), uint8(j), v)
			}
		}
	}
	f.Fuzz(func(t *testing.T, era, field uint8, v int64) {
		data := files[eras[int(era)%len(eras)]]
		edit := metadataEdits[names[int(field)%len(names)]]
		bad := withFooter(t, data, func(md *format.FileMetaData) { edit(md, v) })
		out, err := decodeBytes(bad)
		if err != nil {
			if !errcode.Is(err, ArchiveFileUnreadable) || strings.Contains(err.Error(), "panic") {
				t.Fatalf("%s = %d: %v, want %s from the bounds check", names[int(field)%len(names)], v, err, ArchiveFileUnreadable)
			}
			return
		}
		for _, b := range out.batches {
			if err := b.Validate(); err != nil {
				t.Fatalf("decoded an invalid batch: %v", err)
			}
		}
	})
}
