package s3archive

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"
)

// footerPrefetch is the speculative tail read over S3 (s3ReadShape; a
// local file reads localReadShape's). The footer of a daily blocks
// file is a few KiB; the rest of the tail holds the last row group's last
// columns (miner, gas_used, transaction_count in the archive's column
// order), which a tail of 128 KiB also covers in a daily file, so that one
// request fewer is made per file (5 -> 4 for timestamp, number and miner).
// A request costs far more than 64 KiB more of a read: on S3 a GET's
// first-byte latency is tens of milliseconds, and through the embedded
// endpoint a request costs ~250 us of CPU in the client and server against
// ~10 us to copy 64 KiB.
const footerPrefetch = 128 << 10

// span is a fetched byte range of an object.
type span struct {
	off  int64
	data []byte
}

// rangeReader is an io.ReaderAt over an object that serves reads from ranges
// fetched ahead (the footer, then the projected column chunks) and fetches
// anything else on demand. It is used by one goroutine.
type rangeReader struct {
	ctx   context.Context
	obj   objectReader
	pool  *fetchPool // nil: a goroutine per concurrent range
	uri   string
	size  int64
	shape readShape
	spans []span    // sorted by off
	bufs  *readBufs // buffers to read into; the spans go back to it
	m     *metrics
}

// readBufs are a decode worker's read buffers, handed from file to file:
// the ranges of a file are read into the buffers of a file before it. A
// decoded file holds none of them (every value is copied out of the pages,
// and parquet-go copies the bytes it reads). Used by one goroutine.
type readBufs struct{ free [][]byte }

// Bounds of what a worker keeps: the ranges of one daily file for the
// reference query are 5 of at most 32 KiB from file://.
const (
	maxReadBufs   = 8
	maxReadBufCap = 1 << 20
)

// get returns the smallest free buffer with room for n bytes, or nil.
func (b *readBufs) get(n int64) []byte {
	if b == nil {
		return nil
	}
	best := -1
	for i, f := range b.free {
		if int64(cap(f)) >= n && (best < 0 || cap(f) < cap(b.free[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	f := b.free[best]
	last := len(b.free) - 1
	b.free[best], b.free[last] = b.free[last], nil
	b.free = b.free[:last]
	return f[:0]
}

// release hands the spans' buffers back once the file is decoded.
func (r *rangeReader) release() {
	if r.bufs == nil {
		return
	}
	for _, sp := range r.spans {
		if len(r.bufs.free) < maxReadBufs && cap(sp.data) <= maxReadBufCap {
			r.bufs.free = append(r.bufs.free, sp.data)
		}
	}
	r.spans = nil
}

// fetchPool is a set of long-lived goroutines that fetch ranges for the
// files of one ReadBatch. A goroutine per range (as before) paid for its
// stack to grow through the AWS SDK's deep middleware chain on every
// request: runtime.newstack was ~30 us of each range GET.
type fetchPool struct {
	jobs chan fetchJob
	wg   sync.WaitGroup
}

type fetchJob struct {
	r    *rangeReader
	br   byteRange
	buf  *[]byte // in: a buffer to read into (may be nil); out: the bytes
	err  *error
	done *sync.WaitGroup
}

func newFetchPool(workers int) *fetchPool {
	p := &fetchPool{jobs: make(chan fetchJob, 4*workers)}
	p.wg.Add(workers)
	for range workers {
		go func() {
			defer p.wg.Done()
			for j := range p.jobs {
				*j.buf, *j.err = j.r.obj.readRange(j.r.ctx, j.br.off, j.br.end-j.br.off, *j.buf)
				j.done.Done()
			}
		}()
	}
	return p
}

// close stops the workers once every submitted job is done.
func (p *fetchPool) close() {
	close(p.jobs)
	p.wg.Wait()
}

// fetchAll fetches ranges concurrently: over S3 each range is a round trip,
// and a file has a few per row group. The first range is fetched by the
// calling goroutine, the others by the pool (or, without one, by at most
// rangeConcurrency-1 goroutines of their own). A serial store's ranges are
// read one after the other by the calling goroutine.
func (r *rangeReader) fetchAll(rs []byteRange) error {
	bufs := make([][]byte, len(rs))
	for i, br := range rs {
		bufs[i] = r.bufs.get(br.end - br.off)
	}
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	if r.shape.serial {
		for i, br := range rs {
			if bufs[i], errs[i] = r.obj.readRange(r.ctx, br.off, br.end-br.off, bufs[i]); errs[i] != nil {
				return errs[i]
			}
		}
	} else if len(rs) > 1 {
		rest := rs[1:]
		wg.Add(len(rest))
		if r.pool != nil {
			// The workers never wait on a caller, so a full queue only
			// delays this send.
			for i, br := range rest {
				r.pool.jobs <- fetchJob{r: r, br: br, buf: &bufs[i+1], err: &errs[i+1], done: &wg}
			}
		} else {
			sem := make(chan struct{}, rangeConcurrency-1)
			go func() {
				for i, br := range rest {
					sem <- struct{}{}
					go func() {
						defer func() { <-sem; wg.Done() }()
						bufs[i+1], errs[i+1] = r.obj.readRange(r.ctx, br.off, br.end-br.off, bufs[i+1])
					}()
				}
			}()
		}
	}
	if len(rs) > 0 && !r.shape.serial {
		bufs[0], errs[0] = r.obj.readRange(r.ctx, rs[0].off, rs[0].end-rs[0].off, bufs[0])
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, br := range rs {
		r.spans = append(r.spans, span{off: br.off, data: bufs[i]})
	}
	sort.Slice(r.spans, func(i, j int) bool { return r.spans[i].off < r.spans[j].off })
	return nil
}

// rangeConcurrency bounds the concurrent range requests of one file.
const rangeConcurrency = 4

func (r *rangeReader) fetch(off, n int64) error {
	if n <= 0 {
		return nil
	}
	b, err := r.obj.readRange(r.ctx, off, n, r.bufs.get(n))
	if err != nil {
		return err
	}
	r.spans = append(r.spans, span{off: off, data: b})
	sort.Slice(r.spans, func(i, j int) bool { return r.spans[i].off < r.spans[j].off })
	return nil
}

// cached copies [off, off+len(p)) from the fetched spans if they cover it,
// possibly across adjacent spans.
func (r *rangeReader) cached(p []byte, off int64) bool {
	for len(p) > 0 {
		i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].off > off }) - 1
		if i < 0 || off >= r.spans[i].off+int64(len(r.spans[i].data)) {
			return false
		}
		n := copy(p, r.spans[i].data[off-r.spans[i].off:])
		p, off = p[n:], off+int64(n)
	}
	return true
}

func (r *rangeReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at negative offset %d", off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	end := off + int64(len(p))
	short := end > r.size
	if short {
		end = r.size
	}
	if r.cached(p[:end-off], off) {
		if short {
			return int(end - off), io.EOF
		}
		return int(end - off), nil
	}
	r.m.uncached.Add(1)
	b, err := r.obj.readRange(r.ctx, off, end-off, p)
	if err != nil {
		return 0, err
	}
	n := copy(p, b)
	if short {
		return n, io.EOF
	}
	return n, nil
}

// byteRange is a half-open [off, end) range of an object.
type byteRange struct{ off, end int64 }

// coalesceGap is the widest hole between two projected column chunks that a
// single range read spans over S3 (s3ReadShape). A request costs far more than the bytes of such a
// hole (see footerPrefetch: ~250 us of CPU through the embedded endpoint and
// tens of milliseconds of first-byte latency on S3, against ~10 us to copy
// 64 KiB), so bridging it downloads at most coalesceGap unprojected bytes per
// request saved. In a daily blocks file it merges the first row group's
// miner chunk with the second row group's timestamp and number (a ~62 KB
// hole of difficulty..transaction_count), one request fewer per file.
const coalesceGap = 128 << 10

// coalesce sorts ranges and merges those that overlap, touch or lie at most
// gap bytes apart. Ranges further apart stay apart, so that no more than gap
// unprojected bytes are downloaded between two projected ones.
func coalesce(rs []byteRange, gap int64) []byteRange {
	sort.Slice(rs, func(i, j int) bool { return rs[i].off < rs[j].off })
	var out []byteRange
	for _, r := range rs {
		if r.end <= r.off {
			continue
		}
		if n := len(out); n > 0 && r.off <= out[n-1].end+gap {
			out[n-1].end = max(out[n-1].end, r.end)
			continue
		}
		out = append(out, r)
	}
	return out
}

// chunkRange is the byte range of a column chunk: its dictionary page (if
// any) through its last data page.
func chunkRange(md *format.ColumnMetaData) byteRange {
	start := md.DataPageOffset
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
		start = md.DictionaryPageOffset
	}
	return byteRange{off: start, end: start + md.TotalCompressedSize}
}

// timestamp decoding modes.
const (
	tsMillis = iota + 1
	tsMicros
	tsNanos
	tsInfer // unannotated integers: unit guessed from magnitude
	tsInt96
)

// colDecoder turns the pages of one archive column into an engine column.
// It is used by one goroutine (one file) at a time.
type colDecoder struct {
	name   string // engine column name
	arch   string // archive column name
	typ    stream.Type
	leaf   int // leaf column index in the file, -1 when absent
	maxDef int
	phys   format.Type
	scale  int32 // decimal scale of integer and double columns
	tsMode int
	hexBin bool // binary hashes rendered as 0x-hex
	intern map[string]string

	dict     parquet.Dictionary // dictionary of dictInts/dictStrs/dictFlts
	dictInts []int64
	dictStrs []string
	dictFlts []float64
	ints     []int64 // scratch
	strs     []string
	flts     []float64
}

// schemaElement finds the top-level leaf named name in the flattened schema.
func schemaElement(md *format.FileMetaData, name string) *format.SchemaElement {
	els := md.Schema
	if len(els) == 0 {
		return nil
	}
	var skip func(i int) int // returns the index after the subtree at i
	skip = func(i int) int {
		n := 0
		if els[i].NumChildren.Valid {
			n = int(els[i].NumChildren.V)
		}
		i++
		for k := 0; k < n && i < len(els); k++ {
			i = skip(i)
		}
		return i
	}
	for i := 1; i < len(els); i = skip(i) {
		if els[i].Name == name {
			return &els[i]
		}
	}
	return nil
}

// newColDecoder plans the decoding of configured column col from file f; a
// nil decoder error with leaf -1 means the column is absent (nulls).
func newColDecoder(f *parquet.File, col Column, intern map[string]string) (*colDecoder, error) {
	typ := col.Type
	d := &colDecoder{name: col.Name, arch: col.fileName(), typ: typ, leaf: -1}
	if col.Repeats {
		d.intern = intern
	}
	c := fileColumn(f, d.arch)
	if c == nil {
		if col.Required {
			return nil, fmt.Errorf("required column %q is missing", d.arch)
		}
		return d, nil
	}
	el := schemaElement(f.Metadata(), c.Name())
	if !c.Leaf() || c.Repeated() || el == nil || !el.Type.Valid {
		return nil, fmt.Errorf("column %q is not a flat primitive column", d.arch)
	}
	d.leaf, d.maxDef, d.phys = c.Index(), c.MaxDefinitionLevel(), el.Type.V
	if el.Scale.Valid {
		d.scale = el.Scale.V
	}
	if dt, ok := el.LogicalType.Value.(*format.DecimalType); ok {
		d.scale = dt.Scale
	}
	if !d.planType(el) {
		return nil, fmt.Errorf("column %q has physical type %s (%s), which cannot be read as %s", d.arch, d.phys, el.LogicalType.String(), typ)
	}
	return d, nil
}

// fileColumn finds the top-level column named arch, case-insensitively as
// Spark's resolution is.
func fileColumn(f *parquet.File, arch string) *parquet.Column {
	if c := f.Root().Column(arch); c != nil {
		return c
	}
	for _, cc := range f.Root().Columns() {
		if strings.EqualFold(cc.Name(), arch) {
			return cc
		}
	}
	return nil
}

// planType checks that the file's physical type can be read as d.typ and
// picks the conversion; false means it cannot.
func (d *colDecoder) planType(el *format.SchemaElement) bool {
	binary := d.phys == format.FixedLenByteArray || d.phys == format.ByteArray
	switch d.typ {
	case stream.Int64:
		switch d.phys {
		case format.Int32, format.Int64, format.Double:
			return true
		}
		return binary && isDecimal(el)
	case stream.Float64:
		// The dataset's difficulty columns are doubles; another writer's
		// integer or decimal columns convert, as Spark's upcast does.
		switch d.phys {
		case format.Double, format.Float, format.Int32, format.Int64:
			return true
		}
		return binary && isDecimal(el)
	case stream.Timestamp:
		return d.planTimestamp(el)
	case stream.String:
		d.hexBin = d.phys == format.FixedLenByteArray
		return binary
	}
	return false
}

// planTimestamp picks the unit of an INT96 or INT64 timestamp column.
func (d *colDecoder) planTimestamp(el *format.SchemaElement) bool {
	switch d.phys {
	case format.Int96:
		d.tsMode = tsInt96
		return true
	case format.Int64:
	default:
		return false
	}
	d.tsMode = tsInfer
	if ts, ok := el.LogicalType.Value.(*format.TimestampType); ok {
		switch ts.Unit.Value.(type) {
		case *format.MilliSeconds:
			d.tsMode = tsMillis
		case *format.MicroSeconds:
			d.tsMode = tsMicros
		case *format.NanoSeconds:
			d.tsMode = tsNanos
		}
	} else if el.ConvertedType.Valid {
		switch el.ConvertedType.V {
		case deprecated.TimestampMillis:
			d.tsMode = tsMillis
		case deprecated.TimestampMicros:
			d.tsMode = tsMicros
		}
	}
	return true
}

func isDecimal(el *format.SchemaElement) bool {
	if _, ok := el.LogicalType.Value.(*format.DecimalType); ok {
		return true
	}
	return el.ConvertedType.Valid && el.ConvertedType.V == deprecated.Decimal
}

var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// toInts converts the values of a page (or dictionary) to int64s in dst.
func (d *colDecoder) toInts(v encoding.Values, dst []int64) ([]int64, error) {
	dst = dst[:0]
	switch d.phys {
	case format.Int32:
		for _, x := range v.Int32() {
			dst = append(dst, int64(x))
		}
	case format.Int64:
		dst = append(dst, v.Int64()...)
	case format.Double:
		for _, x := range v.Double() {
			if x != math.Trunc(x) || math.Abs(x) > 1<<62 {
				return nil, fmt.Errorf("column %q holds non-integer %v", d.arch, x)
			}
			dst = append(dst, int64(x))
		}
	case format.FixedLenByteArray:
		data, size := v.FixedLenByteArray()
		if size <= 0 {
			return dst, nil
		}
		for i := 0; i+size <= len(data); i += size {
			x, err := beInt(data[i : i+size])
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", d.arch, err)
			}
			dst = append(dst, x)
		}
	case format.ByteArray:
		data, offs := v.ByteArray()
		for i := 0; i+1 < len(offs); i++ {
			x, err := beInt(data[offs[i]:offs[i+1]])
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", d.arch, err)
			}
			dst = append(dst, x)
		}
	case format.Int96:
		for _, x := range v.Int96() {
			dst = append(dst, int96Micros(x))
		}
	default:
		return nil, fmt.Errorf("column %q: unsupported physical type %s", d.arch, d.phys)
	}
	if d.typ == stream.Timestamp {
		for i, x := range dst {
			dst[i] = tsMicrosOf(d.tsMode, x)
		}
	} else if d.scale > 0 {
		if d.scale >= int32(len(pow10)) {
			return nil, fmt.Errorf("column %q: decimal scale %d too large for an integer", d.arch, d.scale)
		}
		p := pow10[d.scale]
		for i, x := range dst {
			if x%p != 0 {
				return nil, fmt.Errorf("column %q holds a fractional decimal", d.arch)
			}
			dst[i] = x / p
		}
	}
	return dst, nil
}

// toFloats converts the values of a page (or dictionary) to float64s in
// dst: doubles as they are, integers and decimals to the nearest double.
func (d *colDecoder) toFloats(v encoding.Values, dst []float64) ([]float64, error) {
	dst = dst[:0]
	switch d.phys {
	case format.Double:
		dst = append(dst, v.Double()...)
		return dst, nil
	case format.Float:
		for _, x := range v.Float() {
			dst = append(dst, float64(x))
		}
		return dst, nil
	}
	saved := d.scale
	d.scale = 0 // the integers unscaled; the scale divides below
	ints, err := d.toInts(v, nil)
	d.scale = saved
	if err != nil {
		return nil, err
	}
	div := math.Pow10(int(d.scale))
	for _, x := range ints {
		dst = append(dst, float64(x)/div)
	}
	return dst, nil
}

// beInt decodes a big-endian two's complement integer (Parquet DECIMAL).
func beInt(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	neg := b[0]&0x80 != 0
	// Leading sign bytes beyond 8 are allowed (decimal(38,0) of a small value).
	for len(b) > 8 {
		if (neg && b[0] != 0xff) || (!neg && b[0] != 0) {
			return 0, errors.New("decimal value does not fit in int64")
		}
		b = b[1:]
	}
	var x uint64
	if neg {
		x = math.MaxUint64
	}
	for _, c := range b {
		x = x<<8 | uint64(c)
	}
	if (int64(x) < 0) != neg {
		return 0, errors.New("decimal value does not fit in int64")
	}
	return int64(x), nil
}

// julianUnixEpoch is the Julian day number of 1970-01-01.
const julianUnixEpoch = 2440588

// int96Micros converts an Impala/Spark INT96 timestamp (nanoseconds of the
// day, little-endian, then the Julian day) to microseconds since the epoch.
func int96Micros(x deprecated.Int96) int64 {
	nanos := int64(uint64(x[1])<<32 | uint64(x[0]))
	return (int64(x[2])-julianUnixEpoch)*86_400_000_000 + nanos/1000
}

func tsMicrosOf(mode int, x int64) int64 {
	switch mode {
	case tsMillis:
		return x * 1000
	case tsNanos:
		return x / 1000
	case tsInfer:
		a := x
		if a < 0 {
			a = -a
		}
		switch {
		case a < 1e11: // seconds until year 5138
			return x * 1_000_000
		case a < 1e14:
			return x * 1000
		case a < 1e17:
			return x
		default:
			return x / 1000
		}
	}
	return x // micros, and INT96 already converted
}

// toStrs converts byte-array values to strings in dst: one allocation per
// page (or dictionary) that the strings share. The miner values of a plain
// page are interned (so that equal miners are equal pointers, which the
// aggregation compares first); a dictionary's are not: its rows share the
// dictionary's strings already, and interning them in a table carried from
// file to file cost a lookup per entry that missed the cache (a seed
// archive has ~20k miners): 18% of a file's decode.
func (d *colDecoder) toStrs(v encoding.Values, dst []string, dict bool) []string {
	dst = dst[:0]
	intern := d.intern != nil && !dict
	if d.phys == format.FixedLenByteArray {
		data, size := v.FixedLenByteArray()
		if size <= 0 {
			return dst
		}
		buf := make([]byte, 0, len(data)/size*(2+2*size))
		for i := 0; i+size <= len(data); i += size {
			buf = append(buf, '0', 'x')
			buf = hex.AppendEncode(buf, data[i:i+size])
		}
		all := string(buf)
		w := 2 + 2*size
		for i := 0; i+w <= len(all); i += w {
			s := all[i : i+w]
			if intern {
				s = d.internStr(s)
			}
			dst = append(dst, s)
		}
		return dst
	}
	data, offs := v.ByteArray()
	if len(offs) == 0 {
		return dst
	}
	if intern {
		for i := 0; i+1 < len(offs); i++ {
			b := data[offs[i]:offs[i+1]]
			s, ok := d.intern[string(b)]
			if !ok {
				s = string(b)
				d.intern[s] = s
			}
			dst = append(dst, s)
		}
		return dst
	}
	all := string(data[offs[0]:offs[len(offs)-1]])
	base := offs[0]
	for i := 0; i+1 < len(offs); i++ {
		dst = append(dst, all[offs[i]-base:offs[i+1]-base])
	}
	return dst
}

func (d *colDecoder) internStr(s string) string {
	if t, ok := d.intern[s]; ok {
		return t
	}
	d.intern[s] = s
	return s
}

// decodeChunk decodes the column chunk of one row group into col, which has
// room for n rows.
func (d *colDecoder) decodeChunk(chunk parquet.ColumnChunk, col *stream.Column, n int) error {
	pages := chunk.Pages()
	defer pages.Close()
	// Dictionaries belong to their chunk: never match a pointer from another.
	// (Their converted values are copied into the columns, so the slices
	// are reused.)
	d.dict = nil
	pos := 0
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("column %q: read page: %w", d.arch, err)
		}
		err = d.decodePage(p, col, pos, n)
		pos += int(p.NumRows())
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
	if pos != n {
		return fmt.Errorf("column %q holds %d values, row group has %d rows", d.arch, pos, n)
	}
	return nil
}

// decodePage decodes one page into rows [pos, pos+NumRows) of col, which
// has n rows.
func (d *colDecoder) decodePage(p parquet.Page, col *stream.Column, pos, n int) error {
	rows := int(p.NumRows())
	if pos+rows > n {
		return fmt.Errorf("column %q holds more values than its row group's %d rows", d.arch, n)
	}
	defs := p.DefinitionLevels()
	if d.maxDef > 0 && len(defs) != rows {
		return fmt.Errorf("column %q: page has %d definition levels for %d rows", d.arch, len(defs), rows)
	}
	nonNull := rows
	if d.maxDef > 0 {
		nonNull = 0
		for _, l := range defs {
			if int(l) == d.maxDef {
				nonNull++
			}
		}
	}
	pg := page{p: p, defs: defs, pos: pos, rows: rows, nonNull: nonNull, n: n}
	switch d.typ {
	case stream.String:
		return decodeValues(d, pg, col, col.Strings, &d.dictStrs, &d.strs,
			func(v encoding.Values, dst []string, dict bool) ([]string, error) { return d.toStrs(v, dst, dict), nil })
	case stream.Float64:
		return decodeValues(d, pg, col, col.Float64s, &d.dictFlts, &d.flts,
			func(v encoding.Values, dst []float64, _ bool) ([]float64, error) { return d.toFloats(v, dst) })
	default:
		return decodeValues(d, pg, col, col.Int64s, &d.dictInts, &d.ints,
			func(v encoding.Values, dst []int64, _ bool) ([]int64, error) { return d.toInts(v, dst) })
	}
}

// page is one data page of a column chunk and where its rows go.
type page struct {
	p       parquet.Page
	defs    []byte
	pos     int // first row of the page in the row group
	rows    int // rows of the page
	nonNull int // rows with a value
	n       int // rows of the row group
}

// decodeValues decodes the values of pg into vals (the column's value slice
// of its type), through the dictionary (converted once per dictionary into
// *dict) or the page's plain values (converted into *scratch), and spreads
// them over the non-null rows.
func decodeValues[T any](d *colDecoder, pg page, col *stream.Column, vals []T, dict, scratch *[]T,
	conv func(v encoding.Values, dst []T, dict bool) ([]T, error)) error {
	var err error
	dense := d.maxDef == 0 || pg.nonNull == pg.rows
	if pd := pg.p.Dictionary(); pd != nil {
		if pd != d.dict {
			d.dict = pd
			if *dict, err = conv(pd.Page().Data(), (*dict)[:0], true); err != nil {
				return err
			}
		}
		data := pg.p.Data()
		idx := data.Int32()
		if len(idx) != pg.nonNull {
			return fmt.Errorf("column %q: page has %d values, want %d", d.arch, len(idx), pg.nonNull)
		}
		// Without nulls the values go straight into the column; with nulls
		// through the scratch slice, spread out below.
		dst := vals[pg.pos : pg.pos+pg.rows]
		if !dense {
			*scratch = slices.Grow((*scratch)[:0], pg.nonNull)[:pg.nonNull]
			dst = *scratch
		}
		for i, k := range idx {
			if k < 0 || int(k) >= len(*dict) {
				return fmt.Errorf("column %q: dictionary index %d out of range", d.arch, k)
			}
			dst[i] = (*dict)[k]
		}
		if dense {
			markValid(col, pg.pos, pg.rows)
			return nil
		}
	} else if dense {
		// Converted in place: the capacity ends at the page's last row, so
		// a page with more values than rows converts into a new slice
		// and fails the count.
		got, err := conv(pg.p.Data(), vals[pg.pos:pg.pos:pg.pos+pg.rows], false)
		if err != nil {
			return err
		}
		if len(got) != pg.nonNull {
			return fmt.Errorf("column %q: page has %d values, want %d", d.arch, len(got), pg.nonNull)
		}
		markValid(col, pg.pos, pg.rows)
		return nil
	} else {
		if *scratch, err = conv(pg.p.Data(), *scratch, false); err != nil {
			return err
		}
		if len(*scratch) != pg.nonNull {
			return fmt.Errorf("column %q: page has %d values, want %d", d.arch, len(*scratch), pg.nonNull)
		}
	}
	if col.Valid == nil {
		col.Valid = make([]bool, pg.n)
		for i := range pg.pos {
			col.Valid[i] = true
		}
		// Rows after this page are marked as they are decoded.
	}
	k := 0
	for i, l := range pg.defs {
		if int(l) != d.maxDef {
			col.Valid[pg.pos+i] = false
			continue
		}
		col.Valid[pg.pos+i] = true
		vals[pg.pos+i] = (*scratch)[k]
		k++
	}
	return nil
}

// markValid marks rows [pos, pos+n) of col valid, if col tracks validity.
func markValid(col *stream.Column, pos, n int) {
	if col.Valid != nil {
		for i := pos; i < pos+n; i++ {
			col.Valid[i] = true
		}
	}
}

// newColumn allocates an engine column of n rows.
func newColumn(name string, typ stream.Type, n int) stream.Column {
	c := stream.Column{Name: name, Type: typ}
	switch typ {
	case stream.String:
		c.Strings = make([]string, n)
	case stream.Float64:
		c.Float64s = make([]float64, n)
	default:
		c.Int64s = make([]int64, n)
	}
	return c
}

// decodedFile is the result of decoding one file: one batch per row group.
type decodedFile struct {
	batches []*stream.Batch
	rows    int64
}

// decodeFile reads the projected columns of the object at uri.
func decodeFile(ctx context.Context, st store, uri string, size int64, cols []Column, m *metrics) (*decodedFile, error) {
	return decodeFileWith(ctx, st, nil, nil, uri, size, cols, m)
}

// maxInterned bounds an intern table carried from file to file: the
// archive has a few thousand distinct miners; a table past this is cleared
// rather than grown without bound.
const maxInterned = 1 << 14

// decodeState is what one decode goroutine carries from file to file: the
// table its miners of plain pages are interned in (one table per file
// rebuilt the same few hundred miner strings and map entries in every
// file: 300 MB of garbage in a seed backfill) and its read buffers.
type decodeState struct {
	intern map[string]string
	bufs   readBufs
}

func newDecodeState() *decodeState {
	return &decodeState{intern: make(map[string]string, 1024)}
}

// decodeFileWith is decodeFile fetching column chunks through pool (nil:
// goroutines of its own) with the state ds of the calling goroutine (nil:
// a state for this file).
func decodeFileWith(ctx context.Context, st store, pool *fetchPool, ds *decodeState, uri string, size int64, cols []Column, m *metrics) (_ *decodedFile, err error) {
	start := time.Now()
	defer func() { m.decodeNanos.Add(int64(time.Since(start))) }()
	if ds == nil {
		ds = &decodeState{intern: make(map[string]string, 64)}
	} else if len(ds.intern) > maxInterned {
		clear(ds.intern)
	}
	obj, err := st.open(ctx, uri)
	if err != nil {
		return nil, readErr(ctx, err, uri, "open archive object")
	}
	rr := &rangeReader{ctx: ctx, obj: obj, pool: pool, uri: uri, size: size, shape: st.readShape(), bufs: &ds.bufs, m: m}
	defer func() {
		rr.release()
		if cerr := obj.close(); cerr != nil && err == nil {
			err = readErr(ctx, cerr, uri, "close archive object")
		}
	}()
	// A damaged file must fail its batch, not the process: parquet-go can
	// panic on inconsistent metadata (e.g. an out-of-range offset).
	defer func() {
		if r := recover(); r != nil {
			err = unreadable(fmt.Errorf("parquet decoder panic: %v", r), uri, "decode parquet file")
		}
	}()
	f, footer, err := openFooter(ctx, rr)
	if err != nil {
		return nil, err
	}
	decs := make([]*colDecoder, len(cols))
	for i, col := range cols {
		if decs[i], err = newColDecoder(f, col, ds.intern); err != nil {
			return nil, unreadable(err, uri, "unsupported archive schema")
		}
	}
	if err := fetchChunks(rr, f, decs, footer); err != nil {
		return nil, err
	}
	return decodeRowGroups(ctx, f, decs, uri)
}

// openFooter reads the tail of the object (the store's readShape tail,
// more if the footer is larger) and opens it as a Parquet file; footer is the
// offset of the footer.
func openFooter(ctx context.Context, rr *rangeReader) (_ *parquet.File, footer int64, _ error) {
	uri, size := rr.uri, rr.size
	if size < 12 {
		return nil, 0, unreadable(nil, uri, "object is %d bytes, too small to be a Parquet file", size)
	}
	tail := min(size, rr.shape.tail)
	if err := rr.fetch(size-tail, tail); err != nil {
		return nil, 0, readErr(ctx, err, uri, "read parquet footer")
	}
	t := rr.spans[0].data
	if string(t[len(t)-4:]) != "PAR1" {
		return nil, 0, unreadable(nil, uri, "not a Parquet file: no PAR1 magic at its end (truncated upload or another format)")
	}
	flen := int64(binary.LittleEndian.Uint32(t[len(t)-8:]))
	if flen+12 > size {
		return nil, 0, unreadable(nil, uri, "parquet footer length %d exceeds the %d-byte object (truncated file)", flen, size)
	}
	if flen+8 > tail {
		if err := rr.fetch(size-8-flen, flen+8-tail); err != nil {
			return nil, 0, readErr(ctx, err, uri, "read parquet footer")
		}
	}
	f, err := parquet.OpenFile(rr, size, parquet.SkipMagicBytes(true), parquet.SkipPageIndex(true),
		parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	if err != nil {
		return nil, 0, readErr(ctx, err, uri, "open parquet file")
	}
	return f, size - 8 - flen, nil
}

// fetchChunks fetches every projected column chunk up front, coalesced, so
// that the decoder is served from memory and nothing else is downloaded,
// then checks the metadata's bounds (footer is the footer's offset).
func fetchChunks(rr *rangeReader, f *parquet.File, decs []*colDecoder, footer int64) error {
	uri, size := rr.uri, rr.size
	var rs []byteRange
	for _, rg := range f.Metadata().RowGroups {
		for _, d := range decs {
			if d.leaf < 0 {
				continue
			}
			if d.leaf >= len(rg.Columns) {
				return unreadable(nil, uri, "row group lacks column %q", d.arch)
			}
			r := chunkRange(&rg.Columns[d.leaf].MetaData)
			if r.off < 0 || r.end > size {
				return unreadable(nil, uri, "column %q chunk [%d,%d) lies outside the %d-byte object (truncated file)", d.arch, r.off, r.end, size)
			}
			rs = append(rs, r)
		}
	}
	fetchedFrom := rr.spans[0].off // the footer read covers [fetchedFrom, size)
	var need []byteRange
	for _, r := range coalesce(rs, rr.shape.gap) {
		r.end = min(r.end, fetchedFrom)
		if r.end > r.off {
			need = append(need, r)
		}
	}
	if err := rr.fetchAll(need); err != nil {
		return readErr(rr.ctx, err, uri, "read column chunks")
	}
	// Before any allocation sized by the metadata.
	return checkBounds(f.Metadata(), rr, size, footer, leavesOf(decs), uri)
}

// decodeRowGroups decodes the fetched chunks: one batch per non-empty row
// group, a column absent from the file all null.
func decodeRowGroups(ctx context.Context, f *parquet.File, decs []*colDecoder, uri string) (*decodedFile, error) {
	out := &decodedFile{}
	for gi, rg := range f.RowGroups() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := int(rg.NumRows())
		b := &stream.Batch{Len: n, Columns: make([]stream.Column, len(decs))}
		chunks := rg.ColumnChunks()
		for i, d := range decs {
			b.Columns[i] = newColumn(d.name, d.typ, n)
			if d.leaf < 0 {
				b.Columns[i].Valid = make([]bool, n) // all null
				continue
			}
			if err := d.decodeChunk(chunks[d.leaf], &b.Columns[i], n); err != nil {
				return nil, readErr(ctx, err, uri, "decode row group %d", gi)
			}
		}
		if n > 0 {
			out.batches = append(out.batches, b)
			out.rows += int64(n)
		}
	}
	return out, nil
}

// readErr keeps cancellation, and a store that failed for a cause of its
// own (a spent retry budget, refused credentials), distinct from a bad
// file: skipUnreadable must never skip a file the store did not serve.
func readErr(ctx context.Context, err error, uri, format string, args ...any) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if storage.IsStoreFailure(err) {
		return err
	}
	return unreadable(err, uri, format, args...)
}
