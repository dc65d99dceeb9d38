package s3archive

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/columnar"
)

// eraFile writes a small file of era with several row groups and pages.
func eraFile(t testing.TB, era string) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), era+".parquet")
	writeEra(t, p, era, genBlocks(0, 40, day0), parquet.MaxRowsPerRowGroup(16), parquet.PageBufferSize(256))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// footerOf decodes a file's metadata.
func footerOf(t testing.TB, data []byte) (format.FileMetaData, int) {
	t.Helper()
	flen := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	start := len(data) - 8 - flen
	var md format.FileMetaData
	if err := thrift.Unmarshal(&thrift.CompactProtocol{}, data[start:len(data)-8], &md); err != nil {
		t.Fatal(err)
	}
	return md, start
}

// withFooter returns data with its metadata changed by edit.
func withFooter(t testing.TB, data []byte, edit func(md *format.FileMetaData)) []byte {
	t.Helper()
	md, start := footerOf(t, data)
	edit(&md)
	enc, err := thrift.Marshal(&thrift.CompactProtocol{}, &md)
	if err != nil {
		t.Fatal(err)
	}
	out := append(bytes.Clone(data[:start]), enc...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(enc)))
	return append(out, "PAR1"...)
}

// metadataEdits are the fields whose values size the decoder's
// allocations, each set out of bounds (issue 28: num_rows = 2^62).
var metadataEdits = map[string]func(md *format.FileMetaData, v int64){
	"num_rows": func(md *format.FileMetaData, v int64) {
		md.NumRows, md.RowGroups[0].NumRows = v, v
	},
	"file num_rows": func(md *format.FileMetaData, v int64) { md.NumRows = v },
	"group num_rows": func(md *format.FileMetaData, v int64) {
		md.RowGroups[0].NumRows = v
	},
	"total_compressed_size": func(md *format.FileMetaData, v int64) {
		md.RowGroups[0].Columns[0].MetaData.TotalCompressedSize = v
	},
	"data_page_offset": func(md *format.FileMetaData, v int64) {
		md.RowGroups[1].Columns[2].MetaData.DataPageOffset = v
	},
	"dictionary_page_offset": func(md *format.FileMetaData, v int64) {
		md.RowGroups[0].Columns[1].MetaData.DictionaryPageOffset = v
	},
	"num_values": func(md *format.FileMetaData, v int64) {
		md.RowGroups[0].Columns[0].MetaData.NumValues = v
	},
}

func decodeBytes(data []byte) (*decodedFile, error) {
	return decodeFile(context.Background(), memStore{data}, "mem:///f.parquet", int64(len(data)), blockColumns(), &metrics{})
}

// TestMetadataBounds: every metadata size out of bounds (2^62 rows, a
// chunk past the object, offsets beyond it, an overflowing size, a
// negative count) is ARCHIVE_FILE_UNREADABLE naming the file and the
// field, found by the bounds check before any allocation: never a decoder
// panic ("makeslice: len out of range"), in every era.
func TestMetadataBounds(t *testing.T) {
	for _, era := range eras {
		data := eraFile(t, era)
		if _, err := decodeBytes(data); err != nil {
			t.Fatalf("%s: the intact file: %v", era, err)
		}
		for name, edit := range metadataEdits {
			for _, v := range []int64{1 << 62, math.MaxInt64, -1, int64(len(data)) + 1, 1 << 36} {
				if name == "num_values" && v > 0 {
					continue // a count, not a size: only its sign is checked
				}
				bad := withFooter(t, data, func(md *format.FileMetaData) { edit(md, v) })
				_, err := decodeBytes(bad)
				if !errcode.Is(err, ArchiveFileUnreadable) {
					t.Fatalf("%s: %s = %d: %v, want %s", era, name, v, err, ArchiveFileUnreadable)
				}
				msg := err.Error()
				if strings.Contains(msg, "panic") || !strings.Contains(msg, "mem:///f.parquet") {
					t.Fatalf("%s: %s = %d: %q is not the bounds check's verdict naming the file", era, name, v, msg)
				}
			}
		}
	}
}

// TestPageBounds: a page header whose size runs past its chunk, or claims
// more than columnar.MaxPageBytes, more values than its row group has rows, or a
// dictionary of more values than bytes, is refused before the page is
// read.
func TestPageBounds(t *testing.T) {
	data := eraFile(t, "modern")
	md, _ := footerOf(t, data)
	cm := &md.RowGroups[0].Columns[0].MetaData
	pos := chunkRange(cm).off
	var h format.PageHeader
	pr := (&thrift.CompactProtocol{}).NewReaderFromBytes(data[pos:])
	if err := thrift.NewDecoder(pr).Decode(&h); err != nil {
		t.Fatal(err)
	}
	n := pr.BytesRead()
	// The largest compressed size whose encoding keeps the header's length:
	// the file stays well formed around the one damaged field.
	var grown []byte
	for v := int32(1 << 30); v > h.CompressedPageSize; v /= 2 {
		h2 := h
		h2.CompressedPageSize = v
		enc, err := thrift.Marshal(&thrift.CompactProtocol{}, &h2)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) == n {
			grown = enc
			break
		}
	}
	if grown == nil {
		t.Fatal("no larger compressed size encodes in the header's length")
	}
	bad := bytes.Clone(data)
	copy(bad[pos:], grown)
	_, err := decodeBytes(bad)
	if !errcode.Is(err, ArchiveFileUnreadable) || !strings.Contains(err.Error(), "run past the chunk's end") {
		t.Fatalf("a page past its chunk: %v", err)
	}

	for _, c := range []struct {
		name string
		h    format.PageHeader
		want string
	}{
		{"uncompressed", format.PageHeader{UncompressedPageSize: columnar.MaxPageBytes + 1, CompressedPageSize: 10}, "uncompressed size"},
		{"negative", format.PageHeader{CompressedPageSize: -1}, "negative"},
		{"dictionary", format.PageHeader{UncompressedPageSize: 8, CompressedPageSize: 8,
			DictionaryPageHeader: thrift.New(format.DictionaryPageHeader{NumValues: 9})}, "dictionary of 9 values"},
		{"values", format.PageHeader{UncompressedPageSize: 8, CompressedPageSize: 8,
			DataPageHeader: thrift.New(format.DataPageHeader{NumValues: 17})}, "17 values in a row group of 16 rows"},
		{"v2 rows", format.PageHeader{UncompressedPageSize: 8, CompressedPageSize: 8,
			DataPageHeaderV2: thrift.New(format.DataPageHeaderV2{NumValues: 1, NumRows: 1 << 30})}, "rows in a row group of 16 rows"},
	} {
		if err := columnar.CheckPage(&c.h, 100, 16); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
