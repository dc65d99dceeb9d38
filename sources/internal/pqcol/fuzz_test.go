package pqcol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/internal/fixture"
	"github.com/ethstream/ethstream/stream"
)

// fuzzAllocLimit bounds what one decode of a fuzzed file may allocate: the
// largest page the bounds allow, twice (compressed and decoded), plus a
// margin. Without the bounds a claimed page size of gigabytes is allocated
// as claimed.
const fuzzAllocLimit = 2*columnar.MaxPageBytes + 64<<20

// goldenParquet returns the Parquet files of the Delta golden tables (Delta
// Spark and delta-rs wrote them), when the shared fixtures are there: a
// seed corpus only richer with them.
func goldenParquet(tb testing.TB) [][]byte {
	root, ok := fixture.Find("delta-golden")
	if !ok {
		return nil
	}
	var out [][]byte
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && len(b) <= 64<<10 {
			out = append(out, b)
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// FuzzDecode feeds arbitrary bytes, seeded with files other engines wrote
// (the Delta golden tables) and files of every scalar type and of lists
// written by parquet-go, to the file and Delta sources' Parquet path
// (Schema, then Decode of the columns it found): it returns an error or
// batches that validate, never a panic, and allocates at most
// fuzzAllocLimit however large the sizes the file claims.
func FuzzDecode(f *testing.F) {
	golden := goldenParquet(f)
	for _, b := range golden {
		f.Add(b)
	}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]row, 30)
	for i := range rows {
		v := int32(i)
		rows[i] = row{ID: int64(i), Small: &v, TsMs: base, TsNs: base, Amount: int64(i) * 7}
	}
	t := &testing.T{}
	f.Add(writeRows(t, rows, 8))
	f.Add(writeLists(t))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		defer func() {
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > fuzzAllocLimit {
				t.Fatalf("a %d-byte file made the decoder allocate %d bytes", len(data), d)
			}
		}()
		fields, err := Schema(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		cols := make([]Column, len(fields))
		for i, fd := range fields {
			cols[i] = Column{Name: fd.Name, Type: fd.Type}
		}
		bs, err := Decode(bytes.NewReader(data), int64(len(data)), cols)
		if err != nil {
			return
		}
		for _, b := range bs {
			if err := b.Validate(); err != nil {
				t.Fatalf("a decoded batch does not validate: %v", err)
			}
		}
	})
}

// TestGoldenParquetDecodes: every Parquet file of the Delta golden tables
// (the fuzz seeds) passes the bounds check and decodes, so the bounds
// refuse no file a real writer made.
func TestGoldenParquetDecodes(t *testing.T) {
	golden := goldenParquet(t)
	if len(golden) == 0 {
		fixture.Missing(t, "no Parquet file under delta-golden")
	}
	for i, data := range golden {
		fields, err := Schema(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			var ue *UnsupportedError
			if !asUnsupported(err, &ue) {
				t.Errorf("file %d: schema: %v", i, err)
			}
			continue
		}
		cols := make([]Column, len(fields))
		for k, fd := range fields {
			cols[k] = Column{Name: fd.Name, Type: fd.Type}
		}
		if _, err := Decode(bytes.NewReader(data), int64(len(data)), cols); err != nil {
			t.Errorf("file %d: %v", i, err)
		}
	}
}

// TestFewBytesManyRows: a file whose columns are constant or all null
// (100,000 rows in about a kilobyte: RLE) passes the bounds check and
// decodes, as Spark reads it; the bounds once refused any file of more
// rows than bytes.
func TestFewBytesManyRows(t *testing.T) {
	type crow struct {
		Flag bool   `parquet:"flag"`
		N    *int32 `parquet:"n,optional"`
	}
	rows := make([]crow, 100_000)
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[crow](&buf, parquet.Compression(&parquet.Snappy))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if len(data) >= len(rows) {
		t.Fatalf("the file has %d bytes for %d rows: not the case under test", len(data), len(rows))
	}
	bs, err := Decode(bytes.NewReader(data), int64(len(data)), []Column{{"flag", stream.Boolean}, {"n", stream.Int64}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range bs {
		for r := range b.Len {
			if b.Columns[0].Valid != nil && !b.Columns[0].Valid[r] || b.Columns[0].Int64s[r] != 0 || b.Columns[1].Valid == nil || b.Columns[1].Valid[r] {
				t.Fatalf("row %d: flag not false or n not null", n+r)
			}
		}
		n += b.Len
	}
	if n != len(rows) {
		t.Fatalf("%d rows decoded, want %d", n, len(rows))
	}
}

func asUnsupported(err error, ue **UnsupportedError) bool {
	return errors.As(err, ue)
}

// writeLists is a file of lists (a three-level LIST of strings, a bare
// repeated int32) in pages of a few rows, so that list pages hold more
// values than rows.
func writeLists(t *testing.T) []byte {
	type lrow struct {
		ID     int64    `parquet:"id"`
		Topics []string `parquet:"topics,list"`
		Nums   []int32  `parquet:"nums"`
	}
	rows := make([]lrow, 40)
	for i := range rows {
		rows[i].ID = int64(i)
		for k := range i % 4 {
			rows[i].Topics = append(rows[i].Topics, strings.Repeat("t", k+1))
			rows[i].Nums = append(rows[i].Nums, int32(i*k))
		}
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[lrow](&buf, parquet.MaxRowsPerRowGroup(16), parquet.PageBufferSize(256))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// editFooter returns data with its metadata changed by edit.
func editFooter(t *testing.T, data []byte, edit func(md *format.FileMetaData)) []byte {
	t.Helper()
	flen := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	start := len(data) - 8 - flen
	var md format.FileMetaData
	if err := thrift.Unmarshal(&thrift.CompactProtocol{}, data[start:len(data)-8], &md); err != nil {
		t.Fatal(err)
	}
	edit(&md)
	enc, err := thrift.Marshal(&thrift.CompactProtocol{}, &md)
	if err != nil {
		t.Fatal(err)
	}
	out := append(bytes.Clone(data[:start]), enc...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(enc)))
	return append(out, "PAR1"...)
}

// TestDecodeRefusesHugeClaims: a file whose footer claims more than it can
// hold (a footer longer than the file, 2^40 rows in a row group, a chunk
// past the data, a page of more values than rows) is refused by the file
// and Delta sources' decoder before it allocates by the claim, with an
// error wrapping columnar.ErrOutOfBounds; on the old decoder these were
// allocations of the claimed size (827 MB for the 8 bytes "PAR1PAR1") or
// the Parquet library's panic, which ended the process.
func TestDecodeRefusesHugeClaims(t *testing.T) {
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]row, 40)
	for i := range rows {
		rows[i] = row{ID: int64(i), TsMs: base, TsNs: base}
	}
	data := writeRows(t, rows, 16)
	cols := []Column{{"id", stream.Int64}, {"ts_ms", stream.Timestamp}}
	if _, err := Decode(bytes.NewReader(data), int64(len(data)), cols); err != nil {
		t.Fatalf("the intact file: %v", err)
	}
	bad := map[string][]byte{
		"PAR1PAR1":                    []byte("PAR1PAR1PAR1"),
		"footer longer than the file": append(binary.LittleEndian.AppendUint32(bytes.Clone(data[:len(data)-8]), 1<<30), "PAR1"...),
		"2^40 rows in a row group": editFooter(t, data, func(md *format.FileMetaData) {
			md.NumRows += 1<<40 - md.RowGroups[0].NumRows
			md.RowGroups[0].NumRows = 1 << 40
		}),
		"chunk past the data": editFooter(t, data, func(md *format.FileMetaData) {
			md.RowGroups[0].Columns[0].MetaData.TotalCompressedSize = 1 << 36
		}),
		"more rows than the row groups": editFooter(t, data, func(md *format.FileMetaData) { md.NumRows = 1 << 36 }),
	}
	for name, b := range bad {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decode(bytes.NewReader(b), int64(len(b)), cols)
		if _, serr := Schema(bytes.NewReader(b), int64(len(b))); name == "PAR1PAR1" && serr == nil {
			t.Errorf("%s: Schema accepted it", name)
		}
		runtime.ReadMemStats(&after)
		if !errors.Is(err, columnar.ErrOutOfBounds) {
			t.Errorf("%s: %v, want an error wrapping %v", name, err, columnar.ErrOutOfBounds)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
			t.Errorf("%s: %d bytes allocated before the refusal", name, d)
		}
	}
}
