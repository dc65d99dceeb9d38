package columnar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// A Parquet file's metadata says how much the decoder will allocate: rows
// per row group (one slot per row in every projected column), page sizes
// (a buffer per page), chunk extents (the bytes fetched). parquet-go trusts
// them: num_rows = 2^62 surfaced as a recovered "makeslice: len out of
// range", and 2^36 would have been an allocation of hundreds of GiB, not a
// panic. CheckBounds compares every such number with the file before the
// first allocation that depends on it, so a damaged or hostile file is an
// error naming the field (ErrOutOfBounds), which each reader reports with
// its code: the archive source's ARCHIVE_FILE_UNREADABLE, the file
// source's FAILED_READ_FILE, the Delta source's corrupt data file.
//
// The bounds:
//
//   - row counts are non-negative, the row groups add up to the file's
//     num_rows, a row group holds at most MaxRowGroupRows rows, and the file
//     at most MaxRowGroupRows rows or one row per byte of the object,
//     whichever is more: a constant or all-null column takes bytes per
//     thousand rows (RLE), so a small file Spark wrote may hold many rows,
//     while a row group's worth is what one large file already allocates
//     (a block row carries its 32-byte hash: real archive files have ~600
//     bytes per row);
//   - every column chunk lies inside the object, before the footer, its
//     offsets and sizes non-negative and free of overflow;
//   - every page of a projected chunk (its headers walked from the fetched
//     bytes) lies inside its chunk, with non-negative sizes, an
//     uncompressed size of at most maxPageBytes, a dictionary of at most
//     one value per uncompressed byte, and at most the row group's rows of
//     values in a data page of a flat column (a list's leaf, logs.topics,
//     at most its chunk's num_values, itself at most maxListValues).
const (
	MaxRowGroupRows = 1 << 22  // 4.2M; a day of blocks is ~7,200 rows
	MaxPageBytes    = 1 << 28  // 256 MiB; writers' pages are ~1 MiB
	maxHeaderBytes  = 16 << 20 // a page header beyond this is damage
	maxListValues   = 1 << 26  // a list leaf's values in a row group: 16 per row of the largest
)

// ErrOutOfBounds is wrapped by CheckBounds' errors.
var ErrOutOfBounds = errors.New("parquet metadata out of bounds")

// FooterOffset returns where the footer of the Parquet file r of size
// bytes starts, after checking that the file ends in PAR1 and that the
// footer length its tail claims fits in it: parquet-go allocates that
// length before any check ("PAR1PAR1" claimed 827 MB).
func FooterOffset(r io.ReaderAt, size int64) (int64, error) {
	var tail [8]byte
	if size < 12 {
		return 0, fmt.Errorf("%w: a %d-byte file has no footer", ErrOutOfBounds, size)
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil && err != io.EOF {
		return 0, fmt.Errorf("read the footer length: %w", err)
	}
	flen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if string(tail[4:]) != "PAR1" || flen > size-12 {
		return 0, fmt.Errorf("%w: footer length %d in a %d-byte file, or no PAR1 at its end (a truncated file or another format)",
			ErrOutOfBounds, flen, size)
	}
	return size - 8 - flen, nil
}

// CheckBounds checks md against a file of size bytes whose footer starts
// at footer, walking the page headers of the projected leaves' chunks
// through rr (a leaf < 0 is a column the file lacks). Its error wraps
// ErrOutOfBounds and names the first field out of bounds.
func CheckBounds(md *format.FileMetaData, rr io.ReaderAt, size, footer int64, leaves []int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrOutOfBounds, fmt.Sprintf(format, args...))
	}
	if md.NumRows < 0 || md.NumRows > max(size, MaxRowGroupRows) {
		return bad("num_rows %d is out of bounds for a %d-byte object (at most %d or one per byte; damaged metadata)",
			md.NumRows, size, int64(MaxRowGroupRows))
	}
	var rows int64
	buf := make([]byte, 0, 4<<10) // page header windows, shared by the chunks
	repeated := repeatedLeaves(md.Schema)
	for gi := range md.RowGroups {
		rg := &md.RowGroups[gi]
		if rg.NumRows < 0 || rg.NumRows > MaxRowGroupRows {
			return bad("row group %d num_rows %d is out of bounds (0..%d; damaged metadata)", gi, rg.NumRows, MaxRowGroupRows)
		}
		rows += rg.NumRows
		if rows > md.NumRows {
			return bad("the row groups hold more rows than the file's num_rows %d (damaged metadata)", md.NumRows)
		}
		for ci := range rg.Columns {
			if err := checkChunk(&rg.Columns[ci].MetaData, footer); err != nil {
				return bad("row group %d column %d: %v (damaged metadata)", gi, ci, err)
			}
		}
		for _, leaf := range leaves {
			if leaf < 0 || leaf >= len(rg.Columns) {
				continue // the decoder reports a missing column itself
			}
			values := rg.NumRows
			if leaf < len(repeated) && repeated[leaf] {
				if values = rg.Columns[leaf].MetaData.NumValues; values > maxListValues {
					return bad("row group %d column %q: num_values %d exceeds %d (damaged metadata)", gi, columnName(&rg.Columns[leaf].MetaData), values, maxListValues)
				}
			}
			if err := checkPages(&rg.Columns[leaf].MetaData, rr, values, &buf); err != nil {
				return bad("row group %d column %q: %v (damaged file)", gi, columnName(&rg.Columns[leaf].MetaData), err)
			}
		}
	}
	if rows != md.NumRows {
		return bad("the row groups hold %d rows, the file's num_rows says %d (damaged metadata)", rows, md.NumRows)
	}
	return nil
}

// ChunkRange is the byte range [off, end) of a column chunk: from its
// dictionary page (when it has one before its data) over its compressed
// size.
func ChunkRange(md *format.ColumnMetaData) (off, end int64) {
	off = md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < off {
		off = md.DictionaryPageOffset
	}
	return off, off + md.TotalCompressedSize
}

func columnName(md *format.ColumnMetaData) string {
	if len(md.PathInSchema) == 0 {
		return "?"
	}
	return md.PathInSchema[len(md.PathInSchema)-1]
}

// checkChunk checks a column chunk's extent against the footer's start.
func checkChunk(md *format.ColumnMetaData, footer int64) error {
	switch {
	case md.NumValues < 0:
		return fmt.Errorf("num_values %d is negative", md.NumValues)
	case md.TotalCompressedSize < 0 || md.TotalUncompressedSize < 0:
		return fmt.Errorf("chunk sizes %d (compressed), %d (uncompressed) are negative", md.TotalCompressedSize, md.TotalUncompressedSize)
	case md.DataPageOffset < 0 || md.DataPageOffset >= footer:
		return fmt.Errorf("data page offset %d lies outside the data (0..%d)", md.DataPageOffset, footer)
	case md.DictionaryPageOffset < 0 || md.DictionaryPageOffset >= footer:
		return fmt.Errorf("dictionary page offset %d lies outside the data (0..%d)", md.DictionaryPageOffset, footer)
	}
	off, _ := ChunkRange(md)
	if md.TotalCompressedSize > footer-off {
		return fmt.Errorf("chunk [%d, +%d) runs past the data's end %d", off, md.TotalCompressedSize, footer)
	}
	return nil
}

// checkPages walks the page headers of one chunk, reading them into buf.
func checkPages(md *format.ColumnMetaData, rr io.ReaderAt, rows int64, buf *[]byte) error {
	off, end := ChunkRange(md)
	proto := &thrift.CompactProtocol{}
	for pos := off; pos < end; {
		var h format.PageHeader
		n, err := readHeader(rr, proto, buf, pos, end, &h)
		if err != nil {
			return fmt.Errorf("page header at %d: %w", pos, err)
		}
		if err := CheckPage(&h, end-pos-n, rows); err != nil {
			return fmt.Errorf("page at %d: %w", pos, err)
		}
		pos += n + int64(h.CompressedPageSize)
	}
	return nil
}

// readHeader decodes the page header at pos (before end) into h and
// returns its length, reading a window that grows until the header fits.
func readHeader(rr io.ReaderAt, proto thrift.Protocol, buf *[]byte, pos, end int64, h *format.PageHeader) (int64, error) {
	for window := int64(cap(*buf)); ; window *= 4 {
		w := min(window, end-pos)
		b := (*buf)[:0]
		if int64(cap(b)) < w {
			b = make([]byte, 0, w)
			*buf = b
		}
		b = b[:w]
		if _, err := rr.ReadAt(b, pos); err != nil && err != io.EOF {
			return 0, err
		}
		*h = format.PageHeader{}
		pr := proto.NewReaderFromBytes(b)
		err := thrift.NewDecoder(pr).Decode(h)
		if err == nil {
			return int64(pr.BytesRead()), nil
		}
		if w == end-pos || w >= maxHeaderBytes {
			return 0, err
		}
	}
}

// CheckPage checks one page header; left is the chunk's bytes after it,
// rows the most values a page may hold.
func CheckPage(h *format.PageHeader, left, rows int64) error {
	switch {
	case h.CompressedPageSize < 0 || h.UncompressedPageSize < 0:
		return fmt.Errorf("sizes %d (compressed), %d (uncompressed) are negative", h.CompressedPageSize, h.UncompressedPageSize)
	case int64(h.CompressedPageSize) > left:
		return fmt.Errorf("%d bytes run past the chunk's end (%d left)", h.CompressedPageSize, left)
	case h.UncompressedPageSize > MaxPageBytes:
		return fmt.Errorf("uncompressed size %d exceeds %d", h.UncompressedPageSize, MaxPageBytes)
	}
	if d, ok := h.DictionaryPageHeader.Get(); ok && (d.NumValues < 0 || d.NumValues > h.UncompressedPageSize) {
		return fmt.Errorf("dictionary of %d values in %d bytes", d.NumValues, h.UncompressedPageSize)
	}
	if d, ok := h.DataPageHeader.Get(); ok && (d.NumValues < 0 || int64(d.NumValues) > rows) {
		return fmt.Errorf("%d values in a row group of %d rows", d.NumValues, rows)
	}
	if d, ok := h.DataPageHeaderV2.Get(); ok {
		switch {
		case d.NumValues < 0 || d.NumRows < 0 || int64(d.NumRows) > rows || int64(d.NumValues) > rows:
			return fmt.Errorf("%d values, %d rows in a row group of %d rows", d.NumValues, d.NumRows, rows)
		case d.NumNulls < 0 || d.NumNulls > d.NumValues:
			// parquet-go sizes the page's values as NumValues - NumNulls.
			return fmt.Errorf("%d nulls among %d values", d.NumNulls, d.NumValues)
		case d.RepetitionLevelsByteLength < 0 || d.DefinitionLevelsByteLength < 0 ||
			int64(d.RepetitionLevelsByteLength)+int64(d.DefinitionLevelsByteLength) > int64(h.CompressedPageSize):
			// The levels are stored uncompressed at the page's start.
			return fmt.Errorf("levels of %d + %d bytes in a %d-byte page", d.RepetitionLevelsByteLength, d.DefinitionLevelsByteLength, h.CompressedPageSize)
		}
	}
	return nil
}

// repeatedLeaves reports, by leaf index, whether a leaf of the flattened
// schema lies under (or is) a REPEATED field: a list's leaf, whose pages
// hold more values than rows.
func repeatedLeaves(schema []format.SchemaElement) []bool {
	var out []bool
	var walk func(i int, rep bool) int // returns the next element's index
	walk = func(i int, rep bool) int {
		if i >= len(schema) {
			return i
		}
		el := &schema[i]
		rep = rep || el.RepetitionType.Valid && el.RepetitionType.V == format.Repeated
		n := 0
		if el.NumChildren.Valid {
			n = int(el.NumChildren.V)
		}
		if n <= 0 {
			out = append(out, rep)
			return i + 1
		}
		next := i + 1
		for range n {
			if next >= len(schema) {
				break
			}
			next = walk(next, rep)
		}
		return next
	}
	if len(schema) > 0 && schema[0].NumChildren.Valid {
		next := 1
		for range int(schema[0].NumChildren.V) {
			if next >= len(schema) {
				break
			}
			next = walk(next, false)
		}
	}
	return out
}
