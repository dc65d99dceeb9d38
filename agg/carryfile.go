package agg

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// The carry's durable form (doc.go, Closed at commit): the keys version N
// closed at commit, with their values, belong to version N, so a restart
// between N and N+1 still merges batch N+1's rows into them as Spark does.
// A carry of at most carryInlineMax bytes of records is kept in the
// version's operator record ("carry", base64 in its JSON; the .meta's
// CRC-32C covers it); a larger one is a file of its own beside the state
// files, named by the record ("carryFile", "carryBytes"):
//
//	<StateDir>/<version:%020d>.<16 lowercase hex, random>.carry
//
// (the state store keeps a name it does not know, never reading or
// deleting it).
//
// Its format, version 1 (integers little-endian, uvarint as in
// encoding/binary, CRC-32C Castagnoli):
//
//	+---------------------------------------------------------------+
//	| header, 20 bytes: magic "ESCC" | format u16 = 1 | reserved u16 |
//	|   = 0 | version u64 (the state version that wrote it) |        |
//	|   crc32c u32 of the 16 bytes before it                        |
//	+---------------------------------------------------------------+
//	| records: shared uvarint | suffix length uvarint | key suffix |
//	|   value length uvarint | value                                |
//	+---------------------------------------------------------------+
//	| footer, 16 bytes: record count u64 | crc32c u32 of the records |
//	|   | crc32c u32 of the 12 bytes before it                      |
//	+---------------------------------------------------------------+
//
// A record is a state key and its encoded value, as in state; the key is
// given as the length of the prefix it shares with the previous record's
// key (0 for the first) and the bytes after it: records come mostly in key
// order, and keys of one window share its end, start and leading group
// values (a seed backfill's carry shrinks by about a third). The inline
// form is the records alone. Records are in no particular order (no key
// twice); their count is the version's closedRows. A reader verifies the
// size the record names, header, footer, both checksums and count, and
// refuses anything else as CHECKPOINT_CORRUPT naming the file.
//
// The file is published by internal/durable (temp file, fsync, link under
// a name never used before, directory fsync) while Finish writes it, in
// chunks of 1 MB, so the carry never sits in memory; the version's .meta,
// which names it, is published only after it is durable (PrepareCommit and
// Commit wait for it). A crash before the .meta leaves a file no record
// names. The operator keeps the files the committed version's record and
// its predecessor's name (a rerun of the batch after a commit loads the
// predecessor) and deletes every other file and temp file of the
// directory at the commit of a version with a carry or after one.
// Nothing is read from a carry unless a row of the next batch falls in a
// window it may hold (end at or before the next watermark, a key state
// does not hold); then the whole carry is read once.

const (
	carrySuffix = ".carry"
	carryMagic  = "ESCC"
	// carryFormat is the carry file format this build writes and reads.
	carryFormat     = 1
	carryHeaderSize = 20
	carryFooterSize = 16
)

// carryInlineMax bounds the records kept in the operator record (the store
// allows 64 KB for it; base64 makes 4 bytes of 3). A live batch closes a
// handful of keys: it costs no file and no fsync. Tests lower it.
var carryInlineMax = 32 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// carryWriter writes the carry of one version as Finish produces it: into
// memory up to carryInlineMax bytes, then into a file published on a
// goroutine of its own (see above), in chunks of carryChunk bytes handed
// over as they fill (records are appended once, into a chunk). It is not
// safe for concurrent use.
type carryWriter struct {
	fs      vfs.FS
	dir     string
	version int64
	buf     []byte // records not handed over yet (all of them while inline)
	n       int64  // records written
	// crc is the checksum of the records before buf[summed:]: it is
	// updated a chunk at a time (sum), not per record, where CRC-32C's
	// per-call cost was most of it (0.2 of a seed backfill's 0.7 CPU-s
	// in add).
	crc    uint32
	summed int
	prev   []byte // the last record's key

	// The file, once started: name, bytes handed over, full chunks to the
	// publish (closed at the end; carryAhead of them may wait), written
	// ones back.
	name   string
	size   int64
	chunks chan []byte
	free   chan []byte
	// abortc, closed by abort, fails the publish; exited is closed once it
	// returned, with its result in done.
	abortc chan struct{}
	exited chan struct{}
	done   chan error
	// waited says done was read; err is its result.
	waited bool
	err    error
}

// carryChunk is the size of the chunks a carry file is written in.
const carryChunk = 1 << 20

// carryAhead is how many full chunks may wait for the publish while it
// writes another: Finish's merge loop hands a chunk over and goes on
// instead of waiting for the file system's write of the previous one (a
// seed backfill's merge loop spent 0.78 of its finish step's 6.66 s
// waiting in handOver at load 10, one core idle meanwhile). The bytes and
// their order are the same; a few MB more are held.
const carryAhead = 2

func newCarryWriter(fs vfs.FS, stateDir string, version int64) *carryWriter {
	return &carryWriter{fs: fs, dir: stateDir, version: version}
}

// add appends key with its encoded value.
func (w *carryWriter) add(key, val []byte) error {
	w.n++
	sh := sharedPrefix(key, w.prev)
	w.buf = binary.AppendUvarint(w.buf, uint64(sh))
	w.buf = binary.AppendUvarint(w.buf, uint64(len(key)-sh))
	w.buf = append(w.buf, key[sh:]...)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(val)))
	w.buf = append(w.buf, val...)
	w.prev = append(w.prev[:sh], key[sh:]...)
	if w.chunks == nil {
		if len(w.buf) <= carryInlineMax {
			return nil
		}
		if err := w.start(); err != nil {
			return err
		}
	}
	if len(w.buf) >= carryChunk {
		return w.handOver()
	}
	return nil
}

// sharedPrefix returns the length of the longest common prefix of a and
// b, eight bytes at a time: a byte loop over the ~30 bytes keys of one
// window share was a third of add's cost in a seed backfill.
func sharedPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// sum adds the records in buf not summed yet to crc.
func (w *carryWriter) sum() {
	w.crc = crc32.Update(w.crc, castagnoli, w.buf[w.summed:])
	w.summed = len(w.buf)
}

// appendCarryRecord appends key and val as a record of a read carry's
// arena (carry.go): whole keys, so that a get decodes one record.
func appendCarryRecord(b, key, val []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(val)))
	return append(b, val...)
}

// handOver passes w.buf to the publish and takes an empty chunk.
func (w *carryWriter) handOver() error {
	w.sum()
	select {
	case w.chunks <- w.buf:
	case <-w.exited:
		return w.fail(errCarryPublishEnded)
	}
	w.size += int64(len(w.buf))
	select {
	case b := <-w.free:
		w.buf = b[:0]
	default:
		w.buf = make([]byte, 0, carryChunk+carryChunk/8)
	}
	w.summed = 0
	return nil
}

// start begins publishing the file: its header, then the records so far.
func (w *carryWriter) start() error {
	if err := durable.EnsureDir(w.fs, w.dir); err != nil {
		return fmt.Errorf("aggregation: create the state directory for the carry: %w", err)
	}
	var rnd [8]byte
	binary.LittleEndian.PutUint64(rnd[:], rand.Uint64())
	w.name = fmt.Sprintf("%020d.%s%s", w.version, hex.EncodeToString(rnd[:]), carrySuffix)
	w.chunks, w.free = make(chan []byte, carryAhead), make(chan []byte, carryAhead+1)
	w.abortc, w.exited, w.done = make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := durable.For(w.fs).Publish(w.dir, w.name, durable.Options{}, func(dst io.Writer) error {
			for {
				select {
				case b, ok := <-w.chunks:
					if !ok {
						return nil
					}
					if _, err := dst.Write(b); err != nil {
						return err
					}
					select {
					case w.free <- b:
					default:
					}
				case <-w.abortc:
					return errCarryAborted
				}
			}
		})
		w.done <- err
		close(w.exited)
	}()
	h := make([]byte, 0, carryChunk+carryChunk/8)
	h = append(h, carryMagic...)
	h = binary.LittleEndian.AppendUint16(h, carryFormat)
	h = binary.LittleEndian.AppendUint16(h, 0)
	h = binary.LittleEndian.AppendUint64(h, uint64(w.version))
	h = binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
	w.buf = append(h, w.buf...)
	w.summed = len(h) // the header is not a record
	return nil
}

var errCarryPublishEnded = errors.New("carry publish ended")

// fail ends a failed file write, returning the publish's own error when
// it has one.
func (w *carryWriter) fail(err error) error {
	w.abort()
	if w.err != nil {
		err = w.err
	}
	return fmt.Errorf("aggregation: write the closed-at-commit carry %s: %w", w.fs.PathJoin(w.dir, w.name), err)
}

// finish ends the records and sets rec's carry fields: the records inline,
// or the file, whose publish then completes on its goroutine (wait).
func (w *carryWriter) finish(rec *opRecord) error {
	if w.chunks == nil {
		if w.n > 0 {
			rec.Carry = w.buf
		}
		return nil
	}
	w.sum()
	f := binary.LittleEndian.AppendUint64(make([]byte, 0, carryFooterSize), uint64(w.n))
	f = binary.LittleEndian.AppendUint32(f, w.crc)
	f = binary.LittleEndian.AppendUint32(f, crc32.Checksum(f, castagnoli))
	w.buf = append(w.buf, f...)
	w.summed = len(w.buf) // the footer is not a record
	if err := w.handOver(); err != nil {
		return err
	}
	close(w.chunks)
	w.buf = nil
	rec.CarryFile = w.name
	rec.CarryBytes = w.size
	return nil
}

// wait returns once the file is durable (nil) or its publish failed; a
// writer that started no file returns nil at once.
func (w *carryWriter) wait() error {
	if w == nil || w.done == nil {
		return nil
	}
	if !w.waited {
		w.err, w.waited = <-w.done, true
	}
	if w.err != nil {
		return fmt.Errorf("aggregation: publish the closed-at-commit carry: %w", w.err)
	}
	return nil
}

// abort stops a file write in progress; the publish removes its temp file
// (a publish already complete leaves a file no record names: garbage).
func (w *carryWriter) abort() {
	if w == nil || w.done == nil {
		return
	}
	select {
	case <-w.abortc:
	default:
		close(w.abortc)
	}
	if !w.waited {
		w.err, w.waited = <-w.done, true
	}
}

var errCarryAborted = errors.New("the batch was aborted")

// validCarryFile reports whether name (a record's carryFile) names a carry
// file of the state directory, and nothing else.
func validCarryFile(name string) bool {
	base, ok := strings.CutSuffix(name, carrySuffix)
	if !ok {
		return false
	}
	v, r, ok := strings.Cut(base, ".")
	if !ok || len(v) != 20 || len(r) != 16 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	for _, c := range r {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// readCarry returns the carry rec names (inline or in a file under
// stateDir) as a closedCarry of version v; anything but what the record
// says is CHECKPOINT_CORRUPT naming the file.
func readCarry(fs vfs.FS, stateDir string, v int64, rec opRecord) (*closedCarry, error) {
	if rec.CarryFile == "" {
		return parseCarryRecords(rec.Carry, v, rec.ClosedRows, stateDir)
	}
	path := fs.PathJoin(stateDir, rec.CarryFile)
	f, err := fs.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		// Removed since the record naming it was read (by hand, or a
		// checkpoint copied without it): a check (checkCarry) takes it as
		// CarryGone; a batch that already merges by it stops here, and the
		// start after falls back as for any gone carry.
		return nil, errcode.Wrap(err, errcode.CheckpointCorrupt, path,
			"restart the query: the batch after a state version whose carry file is gone drops its windows' late rows with a warning (or restore the file from a backup)",
			"the closed-at-commit carry of state version %d was removed while the query read it", v)
	}
	if err != nil {
		return nil, fmt.Errorf("aggregation: open the closed-at-commit carry: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("aggregation: stat the closed-at-commit carry %s: %w", path, err)
	}
	if st.Size() != rec.CarryBytes || st.Size() < carryHeaderSize+carryFooterSize {
		return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry has %d bytes; the state version's record says %d", st.Size(), rec.CarryBytes)
	}
	b := make([]byte, rec.CarryBytes)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("aggregation: read the closed-at-commit carry %s: %w", path, err)
	}
	h, body, ft := b[:carryHeaderSize], b[carryHeaderSize:len(b)-carryFooterSize], b[len(b)-carryFooterSize:]
	switch {
	case string(h[:4]) != carryMagic:
		return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry has no %q header", carryMagic)
	case binary.LittleEndian.Uint32(h[16:]) != crc32.Checksum(h[:16], castagnoli):
		return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry's header fails its checksum")
	case binary.LittleEndian.Uint16(h[4:]) != carryFormat || binary.LittleEndian.Uint16(h[6:]) != 0:
		return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry has format %d; this build reads %d",
			binary.LittleEndian.Uint16(h[4:]), carryFormat)
	case binary.LittleEndian.Uint32(ft[12:]) != crc32.Checksum(ft[:12], castagnoli):
		return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry's footer fails its checksum")
	case binary.LittleEndian.Uint32(ft[8:]) != crc32.Checksum(body, castagnoli):
		return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry's records fail their checksum")
	case int64(binary.LittleEndian.Uint64(ft)) != rec.ClosedRows:
		return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry holds %d records; the state version closed %d",
			binary.LittleEndian.Uint64(ft), rec.ClosedRows)
	}
	return parseCarryRecords(body, v, rec.ClosedRows, path)
}

// parseCarryRecords decodes body's records, which must be exactly n, into
// a closedCarry's arena.
func parseCarryRecords(body []byte, v, n int64, path string) (*closedCarry, error) {
	c := &closedCarry{version: v, sorted: true, arena: make([]byte, 0, len(body)+len(body)/2)}
	var key []byte
	for off := 0; off < len(body); {
		start := off
		var f [3]uint64
		var val []byte
		for i := range f {
			l, w := binary.Uvarint(body[off:])
			if w <= 0 {
				return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry's record at offset %d is truncated", start)
			}
			off += w
			f[i] = l
			switch {
			case i == 0 && l > uint64(len(key)):
				return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry's record at offset %d shares %d bytes of a %d-byte key", start, l, len(key))
			case i > 0 && l > uint64(len(body)-off):
				return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry's record at offset %d is truncated", start)
			case i == 1:
				key = append(key[:f[0]], body[off:off+int(l)]...)
				off += int(l)
			case i == 2:
				val = body[off : off+int(l)]
				off += int(l)
			}
		}
		if len(c.arena) > 1<<32-1-len(key)-len(val)-20 {
			return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry exceeds 4 GiB")
		}
		c.add(key, val)
	}
	if int64(len(c.offs)) != n {
		return nil, errcode.Corrupt(path, nil, "the closed-at-commit carry holds %d records; the state version closed %d", len(c.offs), n)
	}
	return c, nil
}

// collectCarries deletes the carry files (and temp files) of dir but those
// named in keep; a failure leaves garbage, which the next collection
// deletes, so it is only returned for the caller to log.
func collectCarries(fs vfs.FS, stateDir string, keep ...string) error {
	dir := stateDir
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	var errs []error
	for _, n := range names {
		// Only the carry's own files: the state store's are its own.
		mine := strings.HasSuffix(n, carrySuffix) && !slices.Contains(keep, n) ||
			durable.IsTemp(n) && strings.Contains(n, carrySuffix+".")
		if !mine {
			continue
		}
		if err := fs.Remove(fs.PathJoin(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
