package delta

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// encodeDirect is encodeRows for a file whose every leaf is a long or
// timestamp (INT64), a double (DOUBLE) or a string (BYTE_ARRAY) outside a
// list, as an aggregation's output is: it encodes each column's pages from
// the rowSet's slices itself and writes the file, the same bytes
// parquet-go's column writers write under dataFileOptions
// (TestEncodeDirectBytes compares them): PLAIN data pages v2 of 8192-row
// writes cut where parquet-go's page buffer fills, snappy values, a CRC,
// no page statistics, the column and offset indexes, the level histograms
// and the footer (its schema, created_by and column orders from
// parquet-go's writer of an empty file). parquet-go's column writers take
// the values boxed as parquet.Values into a buffer of values, row indexes
// and levels (about 60% of a seed backfill's 1.4 CPU-s of encoding); here
// a column without nulls needs no per-value level at all. ok is false (and
// nothing is written) for any other layout, and for no rows.
func encodeDirect(w io.Writer, pq *parquet.Schema, rows *rowSet) (groups []format.RowGroup, ok bool, err error) {
	leaves, ok := directLeaves(pq, rows)
	if !ok {
		return nil, false, nil
	}
	tw := parquet.NewWriter(io.Discard, dataFileOptions(pq, 0)...)
	if err := tw.Close(); err != nil {
		return nil, true, err
	}
	md := *tw.File().Metadata() // the footer of an empty file of pq
	e := pageEncoders.Get().(*pageEncoder)
	defer func() {
		e.out = nil // the pool keeps the buffers, not the file being written
		pageEncoders.Put(e)
	}()
	e.out = &offsetWriter{w: w}
	e.bufferSize = int64(float64(pageBufferSize(rows.n)) * 0.98) // as newConcurrentRowGroupWriter's
	if _, err := e.out.Write([]byte("PAR1")); err != nil {
		return nil, true, err
	}
	// parquet-go writes the sorting columns (none) as an empty list.
	rg := format.RowGroup{NumRows: int64(rows.n), FileOffset: e.out.off, SortingColumns: []format.SortingColumn{}}
	indexes := make([]format.ColumnIndex, len(leaves))
	offsets := make([]format.OffsetIndex, len(leaves))
	for c, leaf := range leaves {
		cc, err := e.column(rows, c, leaf)
		if err != nil {
			return nil, true, err
		}
		indexes[c], offsets[c] = cc.index.ColumnIndex(), format.OffsetIndex{PageLocations: cc.pages}
		indexes[c].DefinitionLevelHistogram = cc.pageHists
		rg.Columns = append(rg.Columns, cc.chunk)
		rg.TotalByteSize += cc.chunk.MetaData.TotalUncompressedSize
		rg.TotalCompressedSize += cc.chunk.MetaData.TotalCompressedSize
	}
	// The page index, then the footer: parquet-go's writeFileFooter.
	enc := thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(e.out))
	for c := range indexes {
		rg.Columns[c].ColumnIndexOffset = e.out.off
		if err := enc.Encode(&indexes[c]); err != nil {
			return nil, true, err
		}
		rg.Columns[c].ColumnIndexLength = int32(e.out.off - rg.Columns[c].ColumnIndexOffset)
	}
	for c := range offsets {
		rg.Columns[c].OffsetIndexOffset = e.out.off
		if err := enc.Encode(&offsets[c]); err != nil {
			return nil, true, err
		}
		rg.Columns[c].OffsetIndexLength = int32(e.out.off - rg.Columns[c].OffsetIndexOffset)
	}
	groups = []format.RowGroup{rg}
	md.NumRows, md.RowGroups = int64(rows.n), groups
	start := e.out.off
	if err := enc.Encode(&md); err != nil {
		return nil, true, err
	}
	var tail [8]byte
	binary.LittleEndian.PutUint32(tail[:4], uint32(e.out.off-start))
	copy(tail[4:], "PAR1")
	if _, err := e.out.Write(tail[:]); err != nil {
		return nil, true, err
	}
	return groups, true, nil
}

// directLeaves are pq's leaves (rows' columns, in order) when
// encodeDirect writes them all: each non-repeated, at the definition level
// of its layout leaf, of a type it writes, with no encoding of its own, so
// in parquet-go's defaults (encodingOf): PLAIN, DELTA_LENGTH_BYTE_ARRAY
// for strings.
func directLeaves(pq *parquet.Schema, rows *rowSet) ([]directLeaf, bool) {
	paths := pq.Columns()
	if rows.n == 0 || len(paths) != len(rows.cols) {
		return nil, false
	}
	leaves := make([]directLeaf, len(paths))
	for c, path := range paths {
		lf := rows.l.leaves[c]
		leaf, ok := pq.Lookup(path...)
		if !ok || leaf.MaxRepetitionLevel != 0 || leaf.MaxDefinitionLevel != len(lf.path) {
			return nil, false
		}
		var want parquet.Kind
		switch lf.typ {
		case stream.Int64, stream.Timestamp:
			want = parquet.Int64
		case stream.Float64:
			want = parquet.Double
		case stream.String:
			want = parquet.ByteArray
		default:
			return nil, false
		}
		typ := leaf.Node.Type()
		if typ.Kind() != want || leaf.Node.Encoding() != nil {
			return nil, false
		}
		var enc encoding.Encoding = &parquet.Plain
		if want == parquet.ByteArray {
			enc = &parquet.DeltaLengthByteArray
		}
		leaves[c] = directLeaf{typ: typ, enc: enc, path: path}
	}
	return leaves, true
}

// directLeaf is a leaf encodeDirect writes: its parquet-go type (whose
// pages bound and whose indexer indexes its pages), its values' encoding
// (a string page's is written by page itself) and its path.
type directLeaf struct {
	typ  parquet.Type
	enc  encoding.Encoding
	path []string
}

// pageEncoders keeps the encoders' buffers from file to file: a seed
// backfill's file allocated 1.7 MB more without (a page of 8192 strings,
// its encoding and its compression), more than the rest of its encoding.
var pageEncoders = sync.Pool{New: func() any {
	e := new(pageEncoder)
	e.hdrEnc = thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(&e.hdr))
	return e
}}

// pageEncoder writes the pages of one file's columns, reusing its buffers
// from page to page.
type pageEncoder struct {
	out        *offsetWriter
	bufferSize int64 // parquet-go's: a page ends once its buffer holds this

	levels, defs, vals, comp []byte
	lens                     []int32 // a page's strings' lengths
	ints                     []int64
	floats                   []float64
	hdr                      bytes.Buffer
	hdrEnc                   *thrift.Encoder
}

// columnChunk is what a column's pages leave for the footer and the page
// index.
type columnChunk struct {
	chunk     format.ColumnChunk
	index     parquet.ColumnIndexer
	pages     []format.PageLocation
	pageHists []int64 // the pages' definition level histograms, one after another
}

// column writes the pages of column c (leaf) where parquet-go's column
// writer ends them under encodeRows' writes of encodeChunkRows rows: after
// the write that fills its page buffer (optionalColumnBuffer.Size: a row
// index of 4 bytes and a level byte a row, and the values, 8 bytes each or
// a string's bytes and a 4-byte offset; a column of nulls only fills it
// in two writes), and after the last.
func (e *pageEncoder) column(rows *rowSet, c int, leaf directLeaf) (*columnChunk, error) {
	k := leaf.typ.Kind()
	encs := []format.Encoding{format.RLE, leaf.enc.Encoding()}
	slices.Sort(encs)
	cc := &columnChunk{chunk: format.ColumnChunk{MetaData: format.ColumnMetaData{
		Type: format.Type(k), Encoding: encs, PathInSchema: leaf.path, Codec: format.Snappy, DataPageOffset: e.out.off,
	}}}
	cc.index = leaf.typ.NewColumnIndexer(parquet.DefaultColumnIndexSizeLimit)
	def := byte(len(rows.l.leaves[c].path))
	hist := make([]int64, def+1)
	v := &rows.cols[c]
	nullable := v.Valid != nil || def == 2 && rows.winNull != nil
	width := int64(8) // a value's bytes in the buffer, but a string's own
	if k == parquet.ByteArray {
		width = 4
	}
	start, size := 0, int64(0)
	for lo := 0; lo < rows.n; lo += encodeChunkRows {
		hi := min(lo+encodeChunkRows, rows.n)
		size += 5 * int64(hi-lo)
		if !nullable {
			size += width * int64(hi-lo)
		}
		// The rest (the values of a column with nulls, strings' bytes)
		// is counted only when what is known does not fill the buffer.
		for i := lo; i < hi && size < e.bufferSize && (nullable || k == parquet.ByteArray); i++ {
			if nullable && rows.level(c, i) != def {
				continue
			}
			if nullable {
				size += width
			}
			if k == parquet.ByteArray {
				size += int64(len(v.Strings[i]))
			}
		}
		if size >= e.bufferSize || hi == rows.n {
			if err := e.page(rows, c, leaf, nullable, start, hi, cc, hist); err != nil {
				return nil, err
			}
			start, size = hi, 0
		}
	}
	cc.chunk.MetaData.SizeStatistics.DefinitionLevelHistogram = hist
	return cc, nil
}

// level is the definition level of row i's value in column c: the leaf's
// (1, or 2 in the window struct), one less when it is null, 0 when its
// window is.
func (rs *rowSet) level(c, i int) byte {
	def := byte(len(rs.l.leaves[c].path))
	switch {
	case def == 2 && rs.winNull != nil && rs.winNull[i]:
		return 0
	case rs.cols[c].IsNull(i):
		return def - 1
	}
	return def
}

// page writes rows [a, b) of column c as one data page (v2: levels
// RLE-encoded and uncompressed, values encoded and compressed) and adds it to
// cc and the column's level histogram hist, as parquet-go's writeDataPage
// and recordPageStats do.
func (e *pageEncoder) page(rows *rowSet, c int, leaf directLeaf, nullable bool, a, b int, cc *columnChunk, hist []int64) error {
	ptyp, k := leaf.typ, leaf.typ.Kind()
	def := byte(len(rows.l.leaves[c].path))
	n := b - a
	e.levels = slices.Grow(e.levels[:0], n)[:n]
	pageHist := make([]int64, def+1)
	if nullable {
		for j := range e.levels {
			e.levels[j] = rows.level(c, a+j)
			pageHist[e.levels[j]]++
		}
	} else {
		for j := range e.levels {
			e.levels[j] = def
		}
		pageHist[def] = int64(n)
	}
	for l, x := range pageHist {
		hist[l] += x
	}
	cc.pageHists = append(cc.pageHists, pageHist...)
	numNulls := int64(n) - pageHist[def]
	var err error
	if e.defs, err = (&rle.Encoding{BitWidth: bits.Len8(def)}).EncodeLevels(e.defs[:0], e.levels); err != nil {
		return err
	}
	var lo, hi parquet.Value
	var bounded bool
	var unencoded int64
	v := &rows.cols[c]
	switch k {
	case parquet.Int64:
		xs := presentValues(&e.ints, v.Int64s[a:b], nullable, e.levels, def)
		if e.vals, err = leaf.enc.EncodeInt64(e.vals[:0], xs); err != nil {
			return err
		}
		lo, hi, bounded = ptyp.NewPage(c, len(xs), encoding.Int64Values(xs)).Bounds()
	case parquet.Double:
		xs := presentValues(&e.floats, v.Float64s[a:b], nullable, e.levels, def)
		if e.vals, err = leaf.enc.EncodeDouble(e.vals[:0], xs); err != nil {
			return err
		}
		lo, hi, bounded = ptyp.NewPage(c, len(xs), encoding.DoubleValues(xs)).Bounds()
	default:
		// DELTA_LENGTH_BYTE_ARRAY: the lengths DELTA_BINARY_PACKED, then
		// the strings' bytes (parquet-go's LengthByteArrayEncoding, without
		// its copy of the bytes into one buffer first).
		strs := v.Strings[a:b]
		e.lens = e.lens[:0]
		var min, max string
		// seen: strings already within [min, max], by their memory. An
		// aggregation's output repeats each group's string (one copy per
		// name) window after window, so most of a page's values are
		// strings seen before, whose two comparisons (0.13 of a seed
		// backfill's CPU-s) this skips: equal memory and length is equal
		// content. An empty string is always compared (an empty slot's
		// memory is no string's).
		var seen [64]string
		for j, s := range strs {
			if nullable && e.levels[j] != def {
				continue
			}
			e.lens = append(e.lens, int32(len(s)))
			unencoded += int64(len(s))
			slot := &seen[uintptr(unsafe.Pointer(unsafe.StringData(s)))>>4%uintptr(len(seen))]
			if len(s) > 0 && len(*slot) == len(s) && unsafe.StringData(*slot) == unsafe.StringData(s) {
				continue
			}
			*slot = s
			switch {
			case !bounded:
				min, max, bounded = s, s, true
			case s < min:
				min = s
			case s > max:
				max = s
			}
		}
		if e.vals, err = parquet.DeltaBinaryPacked.EncodeInt32(e.vals[:0], e.lens); err != nil {
			return err
		}
		e.vals = slices.Grow(e.vals, int(unencoded))
		for j, s := range strs {
			if !nullable || e.levels[j] == def {
				e.vals = append(e.vals, s...)
			}
		}
		if bounded {
			lo, hi = parquet.ByteArrayValue([]byte(min)), parquet.ByteArrayValue([]byte(max))
		}
	}
	e.comp, _ = fastSnappy{}.Encode(e.comp[:0], e.vals)
	crc := crc32.Update(crc32.Update(0, crc32.IEEETable, e.defs), crc32.IEEETable, e.comp)
	h := format.PageHeader{Type: format.DataPageV2,
		UncompressedPageSize: int32(len(e.defs) + len(e.vals)), CompressedPageSize: int32(len(e.defs) + len(e.comp)),
		CRC: int32(crc),
		DataPageHeaderV2: thrift.New(format.DataPageHeaderV2{NumValues: int32(n), NumNulls: int32(numNulls),
			NumRows: int32(n), Encoding: leaf.enc.Encoding(), DefinitionLevelsByteLength: int32(len(e.defs)),
			IsCompressed: thrift.New(true)})}
	e.hdr.Reset()
	if err := e.hdrEnc.Encode(&h); err != nil {
		return err
	}
	md := &cc.chunk.MetaData
	hl := int32(e.hdr.Len())
	cc.pages = append(cc.pages, format.PageLocation{Offset: e.out.off, CompressedPageSize: hl + h.CompressedPageSize, FirstRowIndex: int64(a)})
	for _, p := range [][]byte{e.hdr.Bytes(), e.defs, e.comp} {
		if _, err := e.out.Write(p); err != nil {
			return err
		}
	}
	cc.index.IndexPage(int64(n), numNulls, lo, hi)
	md.NumValues += int64(n)
	md.Statistics.NullCount += numNulls
	if bounded {
		st := &md.Statistics
		if st.MaxValue == nil || ptyp.Compare(hi, ptyp.Kind().Value(st.MaxValue)) > 0 {
			buf := st.MaxValue[:0]
			if buf == nil && k == parquet.ByteArray && len(hi.ByteArray()) == 0 {
				buf = []byte{} // an empty max is written, not left out
			}
			st.MaxValue = hi.AppendBytes(buf)
		}
		if st.MinValue == nil || ptyp.Compare(lo, ptyp.Kind().Value(st.MinValue)) < 0 {
			buf := st.MinValue[:0]
			if buf == nil && k == parquet.ByteArray && len(lo.ByteArray()) == 0 {
				buf = []byte{}
			}
			st.MinValue = lo.AppendBytes(buf)
		}
	}
	md.SizeStatistics.UnencodedByteArrayDataBytes += unencoded
	md.TotalUncompressedSize += int64(hl + h.UncompressedPageSize)
	md.TotalCompressedSize += int64(hl + h.CompressedPageSize)
	if len(md.EncodingStats) == 0 {
		md.EncodingStats = []format.PageEncodingStats{{PageType: format.DataPageV2, Encoding: leaf.enc.Encoding()}}
	}
	md.EncodingStats[0].Count++
	return nil
}

// offsetWriter counts the bytes written through it.
type offsetWriter struct {
	w   io.Writer
	off int64
}

func (o *offsetWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	o.off += int64(n)
	return n, err
}

// presentValues are the values of xs a page holds: all of them in a
// column without nulls, else those whose definition level is def (the rows
// that are not null), gathered into *buf (reused from page to page).
func presentValues[T any](buf *[]T, xs []T, nullable bool, levels []byte, def byte) []T {
	if !nullable {
		return xs
	}
	dst := (*buf)[:0]
	for j, l := range levels {
		if l == def {
			dst = append(dst, xs[j])
		}
	}
	*buf = dst
	return dst
}
