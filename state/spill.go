package state

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A repartition's spill: the keys of the old partitions, each old partition
// read in key order, are split into one run file per new partition; then
// each new partition's runs are merged (mergeRun) into the snapshot and the
// sstables of the new cache. Memory is the write buffers of the run files
// and the read buffers of one new partition's runs, whatever the number of
// keys: an in-memory sort of 26M keys peaked at 3.4 GB. The runs stay in
// memory while all of them together hold at most spillMemBudget bytes, so
// that a small state (3,200 keys) creates no file: creating the run files
// cost more than the rest of such a repartition.
//
// # Spill files (LocalDir/gen-<id>/spill/run-<t>)
//
// The spill directory lives in the generation the repartition builds, so
// that a crash leaves it to Open, which deletes every generation but the
// trusted one; a repartition that ends, well or not, removes it. A run file
// is written and read by one Repartition call of one process and never
// outlives it: it has no header, version or checksum (the records come
// from checked checkpoint files or the cache, and the merge checks their
// order again).
//
//	run-<t> := segment*          one segment per old partition that holds
//	                             keys of new partition t, in old partition order
//	segment := record+           strictly ascending keys
//	record  := key length uvarint | key | value length uvarint | value
//
// The segments' byte ranges are kept in memory (spillRun.segs).
const spillDirName = "spill"

// Buffer budgets: the write buffers of all runs, and the read buffers of
// one new partition's segments. A buffer is at least minSpillBuf, so that
// 10,000 new partitions cost 40 MB, not one syscall per record.
const (
	spillWriteBudget = 8 << 20
	spillMemDefault  = 16 << 20
	spillReadBudget  = 4 << 20
	minSpillBuf      = 4 << 10
	maxSpillWriteBuf = 1 << 20
	maxSpillReadBuf  = 256 << 10
)

// spillMemBudget is the bytes of runs kept in memory before they go to
// files; tests lower it.
var spillMemBudget = spillMemDefault

// spillSeg is the byte range [off, end) of one segment of a run file.
type spillSeg struct{ off, end int64 }

// spillRun is the run of one new partition, in mem until the spiller
// goes to files, then in a file; with its row count and key bounds.
type spillRun struct {
	path     string
	mem      []byte
	f        vfs.File
	w        *bufio.Writer
	size     int64
	segs     []spillSeg
	segOld   int // old partition of the open segment, -1 when none is open
	rows     int64
	min, max []byte
}

// spiller splits a stream of records in (old partition, key) order into
// the run files of n new partitions. It is not safe for concurrent use.
type spiller struct {
	fs       vfs.FS
	dir      string
	n        int
	runs     []*spillRun
	bufSize  int
	keys     int64
	bytes    int64
	inMem    int  // bytes of the runs in memory
	onDisk   bool // the runs are files
	lastPart int
	lastKey  []byte
	scratch  []byte
}

// newSpiller splits into n runs under dir about size bytes of records:
// a small state gets small buffers (3,200 keys allocated 46 MB of them).
func newSpiller(fs vfs.FS, dir string, n int, size int64) *spiller {
	return &spiller{
		fs: fs, dir: dir, n: n, runs: make([]*spillRun, n), lastPart: -1,
		bufSize: int(min(max(min(spillWriteBudget/int64(n), size/int64(n)), minSpillBuf), maxSpillWriteBuf)),
	}
}

// add routes one record of old partition oldPart to the run of its new
// partition.
func (sp *spiller) add(oldPart int, k, v []byte) error {
	if oldPart < sp.lastPart || oldPart == sp.lastPart && bytes.Compare(k, sp.lastKey) <= 0 {
		return fmt.Errorf("state: repartition read key %x of partition %d out of order", k, oldPart)
	}
	sp.lastPart, sp.lastKey = oldPart, append(sp.lastKey[:0], k...)
	t := PartitionOf(k, sp.n)
	r := sp.runs[t]
	if r == nil {
		r = &spillRun{segOld: -1}
		sp.runs[t] = r
		if sp.onDisk {
			if err := sp.create(t); err != nil {
				return err
			}
		}
	}
	if r.segOld != oldPart {
		r.closeSeg()
		r.segs = append(r.segs, spillSeg{off: r.size})
		r.segOld = oldPart
	}
	b := binary.AppendUvarint(sp.scratch[:0], uint64(len(k)))
	b = append(b, k...)
	b = binary.AppendUvarint(b, uint64(len(v)))
	b = append(b, v...)
	sp.scratch = b
	if err := sp.write(r, b); err != nil {
		return err
	}
	r.size += int64(len(b))
	if r.rows == 0 || bytes.Compare(k, r.min) < 0 {
		r.min = append(r.min[:0], k...)
	}
	if r.rows == 0 || bytes.Compare(k, r.max) > 0 {
		r.max = append(r.max[:0], k...)
	}
	r.rows++
	sp.keys++
	sp.bytes += int64(len(k) + len(v))
	return nil
}

// write appends b to run r: in memory, or in its file once the runs have
// outgrown spillMemBudget.
func (sp *spiller) write(r *spillRun, b []byte) error {
	if !sp.onDisk {
		r.mem = append(r.mem, b...)
		if sp.inMem += len(b); sp.inMem <= spillMemBudget {
			return nil
		}
		return sp.toDisk()
	}
	if _, err := r.w.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", r.path, err)
	}
	return nil
}

// toDisk moves every run from memory into its file.
func (sp *spiller) toDisk() error {
	sp.onDisk = true
	for t, r := range sp.runs {
		if r == nil {
			continue
		}
		if err := sp.create(t); err != nil {
			return err
		}
		if _, err := r.w.Write(r.mem); err != nil {
			return fmt.Errorf("write %s: %w", r.path, err)
		}
		r.mem = nil
	}
	sp.inMem = 0
	return nil
}

// create opens run t's file.
func (sp *spiller) create(t int) error {
	if err := sp.fs.MkdirAll(sp.dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", sp.dir, err)
	}
	r := sp.runs[t]
	r.path = sp.fs.PathJoin(sp.dir, "run-"+strconv.Itoa(t))
	f, err := sp.fs.Create(r.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("create %s: %w", r.path, err)
	}
	r.f, r.w = f, bufio.NewWriterSize(f, sp.bufSize)
	return nil
}

func (r *spillRun) closeSeg() {
	if r.segOld >= 0 {
		r.segs[len(r.segs)-1].end = r.size
		r.segOld = -1
	}
}

// finish ends the last segments and flushes and closes every run file.
func (sp *spiller) finish() error {
	for _, r := range sp.runs {
		if r == nil {
			continue
		}
		r.closeSeg()
		if r.f == nil {
			continue // in memory, or closed already
		}
		err := r.w.Flush()
		r.w = nil
		err = errors.Join(err, r.f.Close())
		r.f = nil
		if err != nil {
			return fmt.Errorf("write %s: %w", r.path, err)
		}
	}
	return nil
}

// rowsAndBounds returns each new partition's row count and key bounds.
func (sp *spiller) rowsAndBounds() ([]int64, []*keyBounds) {
	rows := make([]int64, sp.n)
	bounds := make([]*keyBounds, sp.n)
	for t, r := range sp.runs {
		if r != nil {
			rows[t] = r.rows
			bounds[t] = &keyBounds{Min: bytes.Clone(r.min), Max: bytes.Clone(r.max)}
		}
	}
	return rows, bounds
}

// remove closes what is still open and deletes the spill directory.
func (sp *spiller) remove() error {
	var errs []error
	for _, r := range sp.runs {
		if r != nil && r.f != nil {
			errs = append(errs, r.f.Close())
			r.f = nil
		}
	}
	if !sp.onDisk {
		return errors.Join(errs...)
	}
	if err := sp.fs.RemoveAll(sp.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove %s: %w", sp.dir, err))
	}
	return errors.Join(errs...)
}

// runCursor reads one segment of a run.
type runCursor struct {
	br interface {
		io.Reader
		io.ByteReader
	}
	left     int64 // bytes of the segment not read yet
	key, val []byte
}

// next reads the segment's next record; ok = false at its end.
func (c *runCursor) next() (ok bool, err error) {
	if c.left == 0 {
		return false, nil
	}
	if c.key, err = c.field(c.key); err != nil {
		return false, err
	}
	if c.val, err = c.field(c.val); err != nil {
		return false, err
	}
	return true, nil
}

// field reads one length-prefixed field into buf.
func (c *runCursor) field(buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(c.br)
	if err != nil {
		return buf, noEOF(err)
	}
	var lb [binary.MaxVarintLen64]byte
	c.left -= int64(binary.PutUvarint(lb[:], n)) + int64(n)
	if c.left < 0 {
		return buf, fmt.Errorf("record overruns its segment by %d bytes", -c.left)
	}
	buf = slices.Grow(buf[:0], int(n))[:n]
	_, err = io.ReadFull(c.br, buf)
	return buf, noEOF(err)
}

func runLess(a, b *runCursor) bool { return bytes.Compare(a.key, b.key) < 0 }

// merge passes the keys of run r to fn in ascending order (a k-way merge
// of its segments); a key in two segments was in two old partitions, and
// is an error.
func (r *spillRun) merge(fs vfs.FS, fn func(k, v []byte) error) (err error) {
	var f vfs.File
	if r.path != "" {
		if f, err = fs.Open(r.path); err != nil {
			return fmt.Errorf("open %s: %w", r.path, err)
		}
		defer func() { err = errors.Join(err, f.Close()) }()
	}
	bufSize := min(max(spillReadBudget/len(r.segs), minSpillBuf), maxSpillReadBuf)
	h := mergeHeap[*runCursor]{less: runLess}
	for _, s := range r.segs {
		c := &runCursor{left: s.end - s.off}
		if f == nil {
			c.br = bytes.NewReader(r.mem[s.off:s.end])
		} else {
			size := int(min(int64(bufSize), s.end-s.off)) // bufio rounds it up to 16 bytes
			c.br = bufio.NewReaderSize(io.NewSectionReader(f, s.off, s.end-s.off), size)
		}
		if ok, err := c.next(); err != nil || !ok {
			return fmt.Errorf("state: repartition run segment at %d %s: empty or damaged: %v", s.off, r.path, err)
		}
		h.push(c)
	}
	var prev []byte
	for first := true; h.len() > 0; first = false {
		c := h.top()
		if !first && bytes.Equal(prev, c.key) {
			return errDuplicateKey{key: bytes.Clone(c.key)}
		}
		if err := fn(c.key, c.val); err != nil {
			return err
		}
		prev = append(prev[:0], c.key...)
		ok, err := c.next()
		if err != nil {
			return fmt.Errorf("read %s: %w", r.path, err)
		}
		if ok {
			h.fixTop()
		} else {
			h.popTop()
		}
	}
	return nil
}

// errDuplicateKey is a key that two old partitions hold.
type errDuplicateKey struct{ key []byte }

func (e errDuplicateKey) Error() string { return fmt.Sprintf("key %x found in two partitions", e.key) }
