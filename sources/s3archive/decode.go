package s3archive

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// footerPrefetch is the speculative tail read over S3 (s3ReadShape; a
// local file reads localReadShape's) until a store has read a file, then
// tailModel's guess from the files read before. The footer of a daily
// blocks file is a few KiB; the rest of the tail holds the last row group's
// last columns (miner, gas_used, transaction_count in the archive's column
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
	// The local and the S3 store read into p, which has room
	// (objectReader.readRange): nothing to copy. A store that answers
	// with a slice of its own (the fuzz test's memStore) is copied.
	n := len(b)
	if n > 0 && &b[0] != &p[0] {
		n = copy(p, b)
	}
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
	off, end := columnar.ChunkRange(md)
	return byteRange{off: off, end: end}
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
	// cols, shared by the source's decode goroutines, recycles the value
	// slices of the batches emitted (nil: none).
	cols *columnar.Pool
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
	of, dec, err := openFile(ctx, st, pool, &ds.bufs, uri, size, cols, m, ds.intern, true)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := of.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	defer recoverUnreadable(&err, uri)
	dec.UsePool(ds.cols)
	return decodeRowGroups(ctx, of.f, dec, uri)
}

// openedFile is an archive object whose footer is read and whose projected
// column chunks are fetched: its row groups decode from memory.
type openedFile struct {
	uri string
	f   *parquet.File
	rr  *rangeReader
	obj objectReader
}

// openFile opens the object at uri, reads its footer, plans the decoding
// of cols (Field.Intern strings into intern) and, when fetch, fetches their
// chunks through pool into buffers of bufs (nil: new ones).
func openFile(ctx context.Context, st store, pool *fetchPool, bufs *readBufs, uri string, size int64, cols []Column, m *metrics, intern map[string]string, fetch bool) (_ *openedFile, _ *columnar.File, err error) {
	obj, err := st.open(ctx, uri)
	if err != nil {
		return nil, nil, readErr(ctx, err, uri, "open archive object")
	}
	of := &openedFile{uri: uri, obj: obj,
		rr: &rangeReader{ctx: ctx, obj: obj, pool: pool, uri: uri, size: size, shape: st.readShape(), bufs: bufs, m: m}}
	defer func() {
		if err != nil {
			of.close()
		}
	}()
	defer recoverUnreadable(&err, uri)
	f, footer, err := openFooter(ctx, of.rr)
	if err != nil {
		return nil, nil, err
	}
	of.f = f
	dec, err := columnar.Open(f, fieldsOf(cols), intern)
	if err != nil {
		return nil, nil, unreadable(err, uri, "unsupported archive schema")
	}
	if err := fetchChunks(of.rr, f, dec.Columns(), footer, fetch); err != nil {
		return nil, nil, err
	}
	return of, dec, nil
}

// close hands the file's read buffers back and closes the object; a second
// call does nothing.
func (o *openedFile) close() error {
	if o.obj == nil {
		return nil
	}
	o.rr.release()
	o.rr.spans = nil
	err := o.obj.close()
	o.obj = nil
	if err != nil {
		return readErr(o.rr.ctx, err, o.uri, "close archive object")
	}
	return nil
}

// recoverUnreadable turns a panic of the Parquet decoder into the file's
// unreadable error: a damaged file must fail its batch, not the process
// (parquet-go can panic on inconsistent metadata, e.g. an out-of-range
// offset). It is deferred by every function that decodes.
func recoverUnreadable(err *error, uri string) {
	if r := recover(); r != nil {
		*err = unreadable(fmt.Errorf("parquet decoder panic: %v", r), uri, "decode parquet file")
	}
}

// openFooter reads the tail of the object (the store's readShape tail, or
// its tailModel's guess; more if the footer is larger) and opens it as a
// Parquet file; footer is the offset of the footer.
func openFooter(ctx context.Context, rr *rangeReader) (_ *parquet.File, footer int64, _ error) {
	uri, size := rr.uri, rr.size
	if size < 12 {
		return nil, 0, unreadable(nil, uri, "object is %d bytes, too small to be a Parquet file", size)
	}
	tail := rr.shape.tail
	if rr.shape.tails != nil {
		tail = rr.shape.tails.next(tail)
	}
	tail = min(size, tail)
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

// fetchChunks fetches every projected column chunk up front (when fetch),
// coalesced, so that the decoder is served from memory and nothing else is
// downloaded, then checks the metadata's bounds (footer is the footer's
// offset). Without fetch the decoder reads the chunks from the object as
// it decodes them (rangeReader.ReadAt).
func fetchChunks(rr *rangeReader, f *parquet.File, cols []columnar.Column, footer int64, fetch bool) error {
	uri, size := rr.uri, rr.size
	var rs []byteRange
	leaves := make([]int, len(cols))
	for i, c := range cols {
		leaves[i] = c.Leaf
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range cols {
			if c.Leaf < 0 {
				continue
			}
			if c.Leaf >= len(rg.Columns) {
				return unreadable(nil, uri, "row group lacks column %q", c.Name)
			}
			r := chunkRange(&rg.Columns[c.Leaf].MetaData)
			if r.off < 0 || r.end > size {
				return unreadable(nil, uri, "column %q chunk [%d,%d) lies outside the %d-byte object (truncated file)", c.Name, r.off, r.end, size)
			}
			rs = append(rs, r)
		}
	}
	if fetch {
		fetchedFrom := rr.spans[0].off // the footer read covers [fetchedFrom, size)
		var need []byteRange
		merged := coalesce(rs, rr.shape.gap)
		if rr.shape.tails != nil {
			rr.shape.tails.observe(tailNeed(merged, size, footer, rr.shape.gap))
		}
		for _, r := range merged {
			r.end = min(r.end, fetchedFrom)
			if r.end > r.off {
				need = append(need, r)
			}
		}
		if err := rr.fetchAll(need); err != nil {
			return readErr(rr.ctx, err, uri, "read column chunks")
		}
	}
	// Before any allocation sized by the metadata.
	return checkBounds(f.Metadata(), rr, size, footer, leaves, uri)
}

// decodeRowGroups decodes the fetched chunks: one batch per non-empty row
// group, a column absent from the file all null.
func decodeRowGroups(ctx context.Context, f *parquet.File, dec *columnar.File, uri string) (*decodedFile, error) {
	out := &decodedFile{}
	for gi := range f.RowGroups() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rg, err := dec.DecodeRowGroup(gi)
		if err != nil {
			return nil, readErr(ctx, err, uri, "decode row group %d", gi)
		}
		if n := rg.Batch.Len; n > 0 {
			out.batches = append(out.batches, rg.Batch)
			out.rows += int64(n)
		}
	}
	return out, nil
}

// fieldsOf is the columnar schema of the configured columns cols.
func fieldsOf(cols []Column) []columnar.Field {
	out := make([]columnar.Field, len(cols))
	for i, c := range cols {
		out[i] = columnar.Field{Name: c.Name, Path: []string{c.fileName()}, Type: c.Type, Required: c.Required, Intern: c.Repeats}
	}
	return out
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
