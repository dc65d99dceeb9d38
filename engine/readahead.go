package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/ethstream/ethstream/stream"
)

// The read-ahead: in an availableNow run, once batch N has read its input
// (its finish step begins), a goroutine polls the sources for batch N+1's
// end offsets, the poll the next trigger would make first, and reads that
// range into memory while batch N evicts, writes its sink, commits its
// state and writes commits/N. The poll is not on the driver's goroutine: a
// source's LatestOffset may write its own log durably (s3archive admits
// the batch's files with an fsync), and on the driver that wait stood
// alone in batch N's finish step. The next trigger plans
// batch N+1 from the offsets polled (run.trigger takes them instead of
// polling again), so its read steps name the ranges read ahead and take
// the chunks from memory, in order, instead of calling ReadBatch.
//
// What is durable, and its order, is unchanged: offsets/N+1 is written by
// batch N+1's WAL step as before, and no row read ahead reaches the
// operator or the sink before batch N+1's read step. A crash or a failed
// batch N loses only memory; the restart re-runs batch N, then polls again
// (a source's LatestOffset re-uses an end it already admitted, as after a
// crash between its admission and offsets/N+1). A plan whose ranges differ
// from those read ahead, a stop or a failure discards the read-ahead.
//
// The engine calls a source from one goroutine at a time (stream.Source):
// the driver calls no source while the poll runs (the next trigger and
// batch N's Source.Commit wait for it), and while a source is read ahead,
// batch N's Source.Commit of it waits until the read-ahead's ReadBatch
// returned (Spark's commit is a hint that data up to the end may be
// dropped: a later call drops nothing still needed).
//
// Only availableNow reads ahead: its sources' ends are fixed at the start
// (PrepareAvailableNow), so polling early yields the batch the next
// trigger would have planned; a live trigger's next poll should see what
// arrived in the meantime.

// readAheadBytes bounds the chunks held in memory ahead of the operator
// (chunkBytes). A seed backfill batch (365 files) decodes to 125-165 MB of
// projected columns, so 16 MB reads ahead only a part of it; more does not
// pay: the decode it moves out of the read step runs during finish and the
// sink's write on the same two cores, and lengthens them by what it saves
// (read -0.2 to -0.5 s, finish +0.2 to +0.9 s). BenchmarkSeedBackfill(File|S3)
// alternating 16/48/64 MB, load 1.9-2.8: file 7.1-7.6 s at 16 MB, 7.0-7.6 at 48
// and 64; S3 7.2-7.9 at 16 and 48, 7.4-8.1 at 64; peak RSS (S3) 498-514 at 16,
// 520-528 at 48, 544-562 at 64 (about 1 MB of RSS per MB of budget since the
// memory limit follows the live heap; 3 MB before it); CPU equal or +0.5 s.
const readAheadBytes = 16 << 20

// readAhead is the next batch's ranges being read on another goroutine. Its
// methods other than the producer's are called from the driver's goroutine.
type readAhead struct {
	// from is each source's offset the poll started from (the loop's
	// Current after batch N), latest what it returned or pollErr its
	// failure; the producer sets them and ranges, then closes polled.
	from, latest map[string]json.RawMessage
	pollErr      error
	ranges       []readRange // the ranges read, in query order
	polled       chan struct{}
	budget       int64 // bytes of chunks held at most (readAheadBytes)
	next         int   // the range the next read step takes
	taken        bool  // the next trigger took latest
	cancel       context.CancelFunc
	done         chan struct{} // closed when the producer returned
	// commits are batch N's Source.Commit calls waiting for the producer.
	commits []aheadCommit

	mu struct {
		sync.Mutex
		cond   *sync.Cond
		queue  []aheadItem
		bytes  int64
		free   []*stream.Batch // consumed chunks, recycled by the producer
		closed bool            // the consumer discarded the read-ahead
	}
}

// aheadItem is a chunk of range r, or, with end set, the end of range r
// with ReadBatch's error.
type aheadItem struct {
	r   int
	b   *stream.Batch
	n   int64 // b's chunkBytes
	end bool
	err error
}

type aheadCommit struct {
	key string
	off json.RawMessage
}

// startReadAhead starts a goroutine that polls the sources for the batch
// after p and reads its ranges, if any source has new data; p's reads are
// done. A failed poll is not batch p's failure: the next trigger meets its
// error where it would have polled.
func (d *driver) startReadAhead(ctx context.Context, p *batchPlan) {
	if !d.aheadOn || d.ahead != nil || p.Kind != stream.KindData {
		return
	}
	from := make(map[string]json.RawMessage, len(d.aheadKeys))
	for k, v := range d.aheadFrom {
		from[k] = v
	}
	for _, r := range p.Ranges {
		from[r.Key] = r.End
	}
	a := &readAhead{from: from, budget: d.o.aheadBytes, polled: make(chan struct{}), done: make(chan struct{})}
	a.mu.cond = sync.NewCond(&a.mu)
	a.mu.free, d.aheadFree = d.aheadFree, nil
	// The reads stop when the read-ahead is discarded; the poll, which
	// discardAhead waits for, runs on ctx as the trigger's would.
	actx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	d.ahead = a
	keys := d.aheadKeys
	go func() {
		defer close(a.done)
		srcs := d.poll(ctx, a, keys)
		if len(srcs) > 0 {
			a.produce(actx, srcs)
		}
	}()
}

// poll sets a's latest offsets of keys (or pollErr) and the ranges to read,
// closes a.polled and returns the ranges' sources, none if nothing is to be
// read (the poll alone is handed on). It runs on the producer's goroutine.
func (d *driver) poll(ctx context.Context, a *readAhead, keys []string) []stream.Source {
	defer close(a.polled)
	latest, err := d.latestOffsets(ctx, keys, a.from)
	if err != nil {
		a.pollErr = err
		return nil
	}
	a.latest = latest
	for _, k := range keys {
		if !bytes.Equal(a.from[k], latest[k]) {
			a.ranges = append(a.ranges, readRange{Key: k, Start: a.from[k], End: latest[k]})
		}
	}
	srcs := make([]stream.Source, len(a.ranges))
	for i, r := range a.ranges {
		srcs[i] = d.byKey[r.Key].src
	}
	return srcs
}

// produce reads each range in order, copying every chunk into memory (the
// source re-uses a chunk's slices once emit returns), at most a.budget
// bytes ahead of the consumer (at least one chunk).
func (a *readAhead) produce(ctx context.Context, srcs []stream.Source) {
	for i, r := range a.ranges {
		err := srcs[i].ReadBatch(ctx, r.Start, r.End, func(in *stream.Batch) error {
			n := chunkBytes(in)
			a.mu.Lock()
			for a.mu.bytes > 0 && a.mu.bytes+n > a.budget && !a.mu.closed {
				a.mu.cond.Wait()
			}
			if a.mu.closed {
				a.mu.Unlock()
				return errAheadDiscarded
			}
			var dst *stream.Batch
			if k := len(a.mu.free); k > 0 {
				dst, a.mu.free = a.mu.free[k-1], a.mu.free[:k-1]
			}
			a.mu.Unlock()
			dst = copyChunk(dst, in)
			a.push(aheadItem{r: i, b: dst, n: n})
			return nil
		})
		a.push(aheadItem{r: i, end: true, err: err})
		if err != nil {
			return
		}
	}
}

var errAheadDiscarded = errors.New("read-ahead discarded")

func (a *readAhead) push(it aheadItem) {
	a.mu.Lock()
	a.mu.queue = append(a.mu.queue, it)
	a.mu.bytes += it.n
	a.mu.cond.Broadcast()
	a.mu.Unlock()
}

// pop waits for the next item.
func (a *readAhead) pop() aheadItem {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.mu.queue) == 0 {
		a.mu.cond.Wait()
	}
	it := a.mu.queue[0]
	a.mu.queue[0] = aheadItem{}
	a.mu.queue = a.mu.queue[1:]
	if it.b != nil {
		a.mu.bytes -= it.n
		a.mu.cond.Broadcast()
	}
	return it
}

// recycle hands a consumed chunk back to the producer (emit's callee does
// not retain it, stream.Source).
func (a *readAhead) recycle(b *stream.Batch) {
	a.mu.Lock()
	a.mu.free = append(a.mu.free, b)
	a.mu.Unlock()
}

// takeLatest is the poll made for the next trigger (ok), if it started
// from current: the loop plans with it, or fails with its error, instead of
// polling.
func (d *driver) takeLatest(current map[string]json.RawMessage) (latest map[string]json.RawMessage, ok bool, err error) {
	a := d.ahead
	if a == nil || a.taken {
		return nil, false, nil
	}
	<-a.polled
	for _, k := range d.aheadKeys {
		if !bytes.Equal(a.from[k], current[k]) {
			return nil, false, nil
		}
	}
	a.taken = true
	if len(a.ranges) == 0 {
		// The producer returns after the poll: nothing to read.
		a.cancel()
		d.ahead, d.aheadFree = nil, a.mu.free
	}
	return a.latest, true, a.pollErr
}

// aheadFor is the read-ahead of read step s, nil if s reads another range
// (the read-ahead is then discarded: its chunks are not s's).
func (d *driver) aheadFor(s step) (*readAhead, error) {
	a := d.ahead
	if a == nil {
		return nil, nil
	}
	<-a.polled
	if a.next < len(a.ranges) {
		r := a.ranges[a.next]
		if r.Key == s.Source && bytes.Equal(r.Start, s.Start) && bytes.Equal(r.End, s.End) {
			return a, nil
		}
	}
	return nil, d.discardAhead()
}

// replay emits the chunks of the read-ahead's next range, as ReadBatch
// would; after the last range it waits for the producer and performs the
// source commits that waited for it.
func (d *driver) replay(a *readAhead, emit func(*stream.Batch) error) error {
	i := a.next
	a.next++
	for {
		it := a.pop()
		if it.r != i {
			panic(fmt.Sprintf("engine: read-ahead item of range %d while replaying range %d", it.r, i))
		}
		if it.end {
			if it.err != nil {
				return errors.Join(it.err, d.discardAhead())
			}
			break
		}
		err := emit(it.b)
		a.recycle(it.b)
		if err != nil {
			return err
		}
	}
	if a.next == len(a.ranges) {
		return d.discardAhead()
	}
	return nil
}

// commitSource is Source.Commit of key, after the read-ahead's producer
// returned if it reads key.
func (d *driver) commitSource(ctx context.Context, key string, off json.RawMessage) error {
	if a := d.ahead; a != nil {
		// The poll may be calling this source.
		<-a.polled
		select {
		case <-a.done:
		default:
			for _, r := range a.ranges {
				if r.Key == key {
					a.commits = append(a.commits, aheadCommit{key, off})
					return nil
				}
			}
		}
	}
	return d.byKey[key].src.Commit(ctx, off)
}

// discardAhead stops the read-ahead, waits for its producer, drops what it
// read and performs the source commits that waited for it.
func (d *driver) discardAhead() error {
	a := d.ahead
	if a == nil {
		return nil
	}
	d.ahead = nil
	a.mu.Lock()
	a.mu.closed = true
	a.mu.cond.Broadcast()
	a.mu.Unlock()
	if a.cancel != nil {
		a.cancel()
	}
	<-a.done
	// The chunks' storage serves the next read-ahead.
	for _, it := range a.mu.queue {
		if it.b != nil {
			a.mu.free = append(a.mu.free, it.b)
		}
	}
	d.aheadFree, a.mu.queue, a.mu.free = a.mu.free, nil, nil
	var errs []error
	for _, c := range a.commits {
		if err := d.byKey[c.key].src.Commit(context.Background(), c.off); err != nil {
			errs = append(errs, fmt.Errorf("commit source %q: %w", c.key, err))
		}
	}
	return errors.Join(errs...)
}

// chunkBytes estimates the memory a copy of b holds: its value slices and
// its strings' bytes.
func chunkBytes(b *stream.Batch) int64 {
	n := int64(len(b.Signs))
	for i := range b.Columns {
		n += columnBytes(&b.Columns[i])
	}
	return n
}

func columnBytes(c *stream.Column) int64 {
	n := int64(8*len(c.Int64s)+8*len(c.Float64s)+16*len(c.Strings)+16*len(c.Decimals)+4*len(c.Offsets)) + int64(len(c.Valid))
	for _, s := range c.Strings {
		n += int64(len(s))
	}
	if d := c.Dict; d != nil {
		n += int64(4*len(d.Index) + 16*len(d.Values))
	}
	if c.Elems != nil {
		n += columnBytes(c.Elems)
	}
	return n
}

// copyChunk copies src into dst (nil: a new batch), re-using dst's slices.
func copyChunk(dst, src *stream.Batch) *stream.Batch {
	if dst == nil {
		dst = &stream.Batch{}
	}
	if cap(dst.Columns) < len(src.Columns) {
		dst.Columns = make([]stream.Column, len(src.Columns))
	}
	dst.Columns = dst.Columns[:len(src.Columns)]
	for i := range src.Columns {
		c, s := &dst.Columns[i], &src.Columns[i]
		old := *c
		*c = stream.Column{Name: s.Name, Type: s.Type, Int64s: old.Int64s[:0], Float64s: old.Float64s[:0],
			Strings: old.Strings[:0], Decimals: old.Decimals[:0]}
		if s.Valid != nil {
			c.Valid = old.Valid[:0]
		}
		c.AppendRange(s, 0, src.Len)
		// The copy keeps the source's dictionary view (its strings are the
		// copy's), in old's storage: the view is only the call's.
		if v := s.DictView(); v != nil {
			var index []int32
			var values []string
			if old.Dict != nil {
				// Cleared to its capacity: a stale value past the new ones
				// would keep an older chunk's dictionary alive (each a few
				// KB; the recycled copies' tails held 25-35 MB of them at
				// a seed backfill's peak).
				index, values = old.Dict.Index[:0], old.Dict.Values[:cap(old.Dict.Values)]
				clear(values)
				values = values[:0]
			}
			c.Dict = stream.NewDict(c.Strings, append(index, v.Index...), append(values, v.Values...))
		}
	}
	signs := dst.Signs[:0]
	dst.Signs = nil
	if src.Signs != nil {
		dst.Signs = append(signs, src.Signs...)
	}
	dst.Len = src.Len
	return dst
}
