package s3archive

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
)

// memStore serves one object from memory.
type memStore struct{ data []byte }

func (s memStore) list(context.Context) ([]object, error) { return nil, nil }
func (s memStore) size(context.Context, string) (int64, error) {
	return int64(len(s.data)), nil
}
func (s memStore) readRange(_ context.Context, _ string, off, n int64) ([]byte, error) {
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
		if len(data) > 0 {
			data = bytes.Clone(data)
			data[int(at)%len(data)] ^= x
		}
		out, err := decodeFile(context.Background(), memStore{data}, "mem:///f.parquet", int64(len(data)), ethblock.Columns, &metrics{})
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
	})
}
