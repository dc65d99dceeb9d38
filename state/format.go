package state

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// The on-disk formats are specified in doc.go; constants here are never
// renumbered.

var crcTable = crc32.MakeTable(crc32.Castagnoli)

const (
	dataMagic         = "ESSD" // ethstream state data file
	dataFormatVersion = 1      // the only data file format so far

	headerLen = 28

	kindDelta    = 1
	kindSnapshot = 2

	recPut    = 1
	recDelete = 2

	chunkTarget = 64 << 10 // a chunk is flushed once its payload reaches this
	maxChunk    = 64 << 20 // larger declared chunks are corrupt, not allocated

	metaHeader        = "ethstream-state-meta v1"
	metaFormatVersion = 2 // written without an operator record; 1 (no partitionKeys) is still read
	// metaFormatClosed and metaFormatWatermark were written by builds up to
	// 27801e4 (format 2 plus closedRows; then closedRows optional plus
	// nextWatermarkMs): two facts of the aggregation kept by the store. They
	// are read, never written: this build hands them to the operator as its
	// record (legacyOperatorRecord).
	metaFormatClosed    = 3
	metaFormatWatermark = 4
	// metaFormatOperator is format 2 plus "operator", the operator's own
	// record of the version (Store.SetOperatorRecord), bytes the store
	// keeps without reading them: written by a version that has one.
	metaFormatOperator = 5
	// maxOperatorRecord bounds an operator record: it travels in every
	// .meta, so it is a few facts, not state.
	maxOperatorRecord = 64 << 10

	kindNameDelta    = "delta"
	kindNameSnapshot = "snapshot"
)

// record is one entry of a data file. Key and Val alias the reader's buffer
// and are valid only during the callback.
type record struct {
	Kind      byte
	Partition int
	Key, Val  []byte
}

// dataWriter streams records into the chunked data file format.
type dataWriter struct {
	w       io.Writer
	payload []byte
	count   uint64
	written int64
	hdr     [8]byte
}

func newDataWriter(w io.Writer, kind byte, version int64, attempt, partitions int) (*dataWriter, error) {
	dw := &dataWriter{w: w, payload: make([]byte, 0, chunkTarget+1024)}
	h := make([]byte, 0, headerLen)
	h = append(h, dataMagic...)
	h = binary.LittleEndian.AppendUint16(h, dataFormatVersion)
	h = append(h, kind, 0)
	h = binary.LittleEndian.AppendUint64(h, uint64(version))
	h = binary.LittleEndian.AppendUint32(h, uint32(attempt))
	h = binary.LittleEndian.AppendUint32(h, uint32(partitions))
	h = binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, crcTable))
	n, err := w.Write(h)
	dw.written += int64(n)
	return dw, err
}

func (dw *dataWriter) add(kind byte, partition int, key, val []byte) error {
	p := appendRecord(dw.payload, kind, partition, key, val)
	dw.payload = p
	dw.count++
	if len(p) >= chunkTarget {
		return dw.flushChunk()
	}
	return nil
}

func (dw *dataWriter) flushChunk() error {
	if len(dw.payload) == 0 {
		return nil
	}
	binary.LittleEndian.PutUint32(dw.hdr[0:4], uint32(len(dw.payload)))
	binary.LittleEndian.PutUint32(dw.hdr[4:8], crc32.Checksum(dw.payload, crcTable))
	n, err := dw.w.Write(dw.hdr[:])
	dw.written += int64(n)
	if err != nil {
		return err
	}
	n, err = dw.w.Write(dw.payload)
	dw.written += int64(n)
	dw.payload = dw.payload[:0]
	return err
}

// finish writes the last chunk and the footer: a zero length, the record
// count and the CRC of the count.
func (dw *dataWriter) finish() error {
	if err := dw.flushChunk(); err != nil {
		return err
	}
	var f [16]byte
	binary.LittleEndian.PutUint64(f[4:12], dw.count)
	binary.LittleEndian.PutUint32(f[12:16], crc32.Checksum(f[4:12], crcTable))
	n, err := dw.w.Write(f[:])
	dw.written += int64(n)
	return err
}

// dataHeader is the decoded fixed header of a data file.
type dataHeader struct {
	Kind       byte
	Version    int64
	Attempt    int
	Partitions int
}

func parseDataHeader(h []byte) (dataHeader, error) {
	if len(h) < headerLen {
		return dataHeader{}, fmt.Errorf("header truncated: %d of %d bytes", len(h), headerLen)
	}
	if string(h[:4]) != dataMagic {
		return dataHeader{}, fmt.Errorf("bad magic %q", h[:4])
	}
	if got, want := binary.LittleEndian.Uint32(h[24:28]), crc32.Checksum(h[:24], crcTable); got != want {
		return dataHeader{}, fmt.Errorf("header checksum mismatch: stored %08x, computed %08x", got, want)
	}
	if v := binary.LittleEndian.Uint16(h[4:6]); v != dataFormatVersion {
		return dataHeader{}, fmt.Errorf("unsupported data format version %d (this build reads %d)", v, dataFormatVersion)
	}
	hd := dataHeader{
		Kind:       h[6],
		Version:    int64(binary.LittleEndian.Uint64(h[8:16])),
		Attempt:    int(binary.LittleEndian.Uint32(h[16:20])),
		Partitions: int(binary.LittleEndian.Uint32(h[20:24])),
	}
	if hd.Kind != kindDelta && hd.Kind != kindSnapshot {
		return dataHeader{}, fmt.Errorf("unknown data file kind %d", hd.Kind)
	}
	if hd.Partitions <= 0 || hd.Partitions > maxPartitions {
		return dataHeader{}, fmt.Errorf("partition count %d out of range", hd.Partitions)
	}
	return hd, nil
}

// decodeData parses a whole data file from r, verifying checksums, record
// order ((partition, key) strictly ascending), partition placement and the
// footer's count. It calls fn for each record. Errors other than fn's are
// plain (the caller attaches the path and the CHECKPOINT_CORRUPT code).
func decodeData(r io.Reader, fn func(hd dataHeader, rec record) error) (dataHeader, uint64, error) {
	d, err := newDataReader(r)
	if err != nil {
		return d.hd, 0, err
	}
	for {
		rec, ok, err := d.next()
		if err != nil || !ok {
			return d.hd, d.count, err
		}
		if fn != nil {
			if err := fn(d.hd, rec); err != nil {
				return d.hd, d.count, errCallback{err}
			}
		}
	}
}

// dataReader decodes a data file one record at a time, with the checks of
// decodeData: a k-way merge of files (a repartition's chain) pulls from
// several at once. Records alias its buffer until the next call of next.
type dataReader struct {
	br       *bufio.Reader
	hd       dataHeader
	payload  []byte
	p        []byte // undecoded rest of payload
	count    uint64
	lastPart int
	lastKey  []byte
	offset   int64 // of the chunk in payload
	done     bool
}

// newDataReader reads and checks the header of the data file in r.
func newDataReader(r io.Reader) (*dataReader, error) {
	d := &dataReader{br: bufio.NewReaderSize(r, 256<<10), lastPart: -1, offset: headerLen}
	var h [headerLen]byte
	if _, err := io.ReadFull(d.br, h[:]); err != nil {
		return d, fmt.Errorf("read header: %w", noEOF(err))
	}
	var err error
	d.hd, err = parseDataHeader(h[:])
	return d, err
}

// next returns the next record, or ok = false after the footer verified.
func (d *dataReader) next() (rec record, ok bool, err error) {
	for len(d.p) == 0 {
		if d.done {
			return rec, false, nil
		}
		if err := d.nextChunk(); err != nil {
			return rec, false, err
		}
	}
	rec, d.p, err = decodeRecord(d.p)
	if err != nil {
		return rec, false, fmt.Errorf("chunk at offset %d: %w", d.offset, err)
	}
	if d.hd.Kind == kindSnapshot && rec.Kind != recPut {
		return rec, false, fmt.Errorf("chunk at offset %d: delete record in a snapshot", d.offset)
	}
	if rec.Partition >= d.hd.Partitions {
		return rec, false, fmt.Errorf("chunk at offset %d: partition %d of %d", d.offset, rec.Partition, d.hd.Partitions)
	}
	if want := PartitionOf(rec.Key, d.hd.Partitions); want != rec.Partition {
		return rec, false, fmt.Errorf("chunk at offset %d: key %x recorded in partition %d, belongs to %d", d.offset, rec.Key, rec.Partition, want)
	}
	if rec.Partition < d.lastPart || (rec.Partition == d.lastPart && bytes.Compare(rec.Key, d.lastKey) <= 0) {
		return rec, false, fmt.Errorf("chunk at offset %d: records out of order", d.offset)
	}
	d.lastPart = rec.Partition
	d.lastKey = append(d.lastKey[:0], rec.Key...)
	d.count++
	return rec, true, nil
}

// nextChunk reads the chunk after the current one into payload, or the
// footer (setting done).
func (d *dataReader) nextChunk() error {
	if len(d.payload) > 0 {
		d.offset += 8 + int64(len(d.payload))
		d.payload = d.payload[:0]
	}
	var ch [8]byte
	if _, err := io.ReadFull(d.br, ch[:4]); err != nil {
		return fmt.Errorf("read chunk header at offset %d: %w", d.offset, noEOF(err))
	}
	n := binary.LittleEndian.Uint32(ch[:4])
	if n == 0 {
		d.done = true
		return readFooter(d.br, d.offset, d.count)
	}
	if n > maxChunk {
		return fmt.Errorf("chunk at offset %d declares %d bytes", d.offset, n)
	}
	if _, err := io.ReadFull(d.br, ch[4:8]); err != nil {
		return fmt.Errorf("read chunk header at offset %d: %w", d.offset, noEOF(err))
	}
	var err error
	if d.payload, err = readChunk(d.br, d.payload[:0], n, binary.LittleEndian.Uint32(ch[4:8]), d.offset); err != nil {
		return err
	}
	d.p = d.payload
	return nil
}

// readFooter reads the footer at offset (the record count and its CRC)
// and checks that it counts the count records read and ends the file.
func readFooter(br *bufio.Reader, offset int64, count uint64) error {
	var f [12]byte
	if _, err := io.ReadFull(br, f[:]); err != nil {
		return fmt.Errorf("read footer at offset %d: %w", offset, noEOF(err))
	}
	if got, want := binary.LittleEndian.Uint32(f[8:12]), crc32.Checksum(f[:8], crcTable); got != want {
		return fmt.Errorf("footer checksum mismatch at offset %d", offset)
	}
	if c := binary.LittleEndian.Uint64(f[:8]); c != count {
		return fmt.Errorf("footer says %d records, file holds %d", c, count)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fmt.Errorf("trailing bytes after footer at offset %d", offset+16)
	}
	return nil
}

// readChunk reads a chunk's n payload bytes into payload and checks them
// against the stored CRC. The buffer grows as bytes arrive, so a damaged
// length cannot make us allocate 64 MB for a short file.
func readChunk(br *bufio.Reader, payload []byte, n, crc uint32, offset int64) ([]byte, error) {
	for len(payload) < int(n) {
		step := min(int(n)-len(payload), 1<<20)
		payload = slices.Grow(payload, step)
		m, err := io.ReadFull(br, payload[len(payload):len(payload)+step])
		payload = payload[:len(payload)+m]
		if err != nil {
			return payload, fmt.Errorf("read chunk at offset %d: %w", offset, noEOF(err))
		}
	}
	if got := crc32.Checksum(payload, crcTable); crc != got {
		return payload, fmt.Errorf("chunk checksum mismatch at offset %d: stored %08x, computed %08x", offset, crc, got)
	}
	return payload, nil
}

// errCallback marks an error returned by decodeData's callback, which is not
// a sign of corruption.
type errCallback struct{ err error }

func (e errCallback) Error() string { return e.err.Error() }
func (e errCallback) Unwrap() error { return e.err }

// appendRecord appends one record's encoding (decodeRecord's input) to p.
func appendRecord(p []byte, kind byte, partition int, key, val []byte) []byte {
	p = append(p, kind)
	p = binary.AppendUvarint(p, uint64(partition))
	p = binary.AppendUvarint(p, uint64(len(key)))
	p = append(p, key...)
	if kind == recPut {
		p = binary.AppendUvarint(p, uint64(len(val)))
		p = append(p, val...)
	}
	return p
}

func decodeRecord(p []byte) (record, []byte, error) {
	var rec record
	rec.Kind = p[0]
	if rec.Kind != recPut && rec.Kind != recDelete {
		return rec, nil, fmt.Errorf("unknown record kind %d", rec.Kind)
	}
	p = p[1:]
	part, n := binary.Uvarint(p)
	if n <= 0 || part > maxPartitions {
		return rec, nil, errors.New("bad record partition")
	}
	rec.Partition = int(part)
	p = p[n:]
	kl, n := binary.Uvarint(p)
	if n <= 0 || kl > uint64(len(p)-n) {
		return rec, nil, errors.New("bad record key length")
	}
	rec.Key = p[n : n+int(kl) : n+int(kl)]
	p = p[n+int(kl):]
	if rec.Kind == recPut {
		vl, n := binary.Uvarint(p)
		if n <= 0 || vl > uint64(len(p)-n) {
			return rec, nil, errors.New("bad record value length")
		}
		rec.Val = p[n : n+int(vl) : n+int(vl)]
		p = p[n+int(vl):]
	}
	return rec, p, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readDataFile decodes the data file named by m, checking that it is the file
// m describes. Corruption is a CHECKPOINT_CORRUPT error naming the path.
func readDataFile(fs vfs.FS, dir string, m *versionMeta, fn func(rec record) error) error {
	f, err := openDataFile(fs, dir, m)
	if err != nil {
		return err
	}
	defer f.close()
	for {
		rec, ok, err := f.next()
		if err != nil || !ok {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
}

// dataFile reads the data file of one version record by record (next),
// with every check of readDataFile.
type dataFile struct {
	path string
	m    *versionMeta
	f    vfs.File
	d    *dataReader
}

// openDataFile opens the data file named by m and checks its size and
// header against m.
func openDataFile(fs vfs.FS, dir string, m *versionMeta) (*dataFile, error) {
	path := fs.PathJoin(dir, m.Data)
	f, err := fs.Open(path)
	if err != nil {
		return nil, errcode.Corrupt(path, err, "state data file of version %d is missing or unreadable", m.Version)
	}
	if st, err := f.Stat(); err == nil && st.Size() != m.DataSize {
		_ = f.Close()
		return nil, errcode.Corrupt(path, nil, "state data file has %d bytes, its metadata says %d", st.Size(), m.DataSize)
	}
	d, err := newDataReader(f)
	if err != nil {
		_ = f.Close()
		return nil, errcode.Corrupt(path, err, "decode state data file")
	}
	hd := d.hd
	wantKind := byte(kindDelta)
	if m.Kind == kindNameSnapshot {
		wantKind = kindSnapshot
	}
	if hd.Kind != wantKind || hd.Version != m.Version || hd.Attempt != m.Attempt || hd.Partitions != m.Partitions {
		_ = f.Close()
		return nil, errcode.Corrupt(path, nil, "state data file header (kind %d version %d attempt %d partitions %d) does not match its metadata",
			hd.Kind, hd.Version, hd.Attempt, hd.Partitions)
	}
	return &dataFile{path: path, m: m, f: f, d: d}, nil
}

// next returns the next record (valid until the following call), or ok =
// false at the verified end of the file.
func (df *dataFile) next() (rec record, ok bool, err error) {
	rec, ok, err = df.d.next()
	if err != nil {
		return rec, false, errcode.Corrupt(df.path, err, "decode state data file")
	}
	if !ok && int64(df.d.count) != df.m.DataRecords {
		return rec, false, errcode.Corrupt(df.path, nil, "state data file holds %d records, its metadata says %d", df.d.count, df.m.DataRecords)
	}
	return rec, ok, nil
}

// close closes the file; a read-only file has nothing to lose at close, so
// its error is dropped, as it always was.
func (df *dataFile) close() { _ = df.f.Close() }

// versionRef names one attempt of one version.
type versionRef struct {
	Version int64 `json:"version"`
	Attempt int   `json:"attempt"`
}

// versionMeta is the metadata file of one committed version (doc.go).
type versionMeta struct {
	FormatVersion int         `json:"formatVersion"`
	StoreID       string      `json:"storeId"`
	Version       int64       `json:"version"`
	Attempt       int         `json:"attempt"`
	Kind          string      `json:"kind"`
	Data          string      `json:"data"`
	DataSize      int64       `json:"dataSize"`
	DataRecords   int64       `json:"dataRecords"`
	Base          *versionRef `json:"base"`
	ChainLength   int         `json:"chainLength"`
	ChainBytes    int64       `json:"chainBytes"`
	Partitions    int         `json:"partitions"`
	Rows          int64       `json:"rows"`
	PartitionRows []int64     `json:"partitionRows"`
	// PartitionKeys (format 2) holds each partition's smallest and largest
	// key (or a wider range after a lazy cache's deletes: doc.go), null for an empty partition or one whose bounds are unknown
	// (carried forward from a format-1 version). Absent in format 1.
	PartitionKeys []*keyBounds `json:"partitionKeys,omitempty"`
	Schema        Schema       `json:"schema"`
	// Operator (format 5, required there, absent before) is the operator's
	// record of this version (Store.SetOperatorRecord), opaque to the store.
	Operator []byte `json:"operator,omitempty"` // JSON: base64
	// LegacyClosedRows (format 3, absent when 0; optional in 4) and
	// LegacyNextWatermarkMs (format 4, required there) are the two facts of
	// the aggregation that builds up to 27801e4 kept here; read only, as
	// the operator record legacyOperatorRecord makes of them.
	LegacyClosedRows      int64  `json:"closedRows,omitempty"`
	LegacyNextWatermarkMs *int64 `json:"nextWatermarkMs,omitempty"`

	// own is set only on the stand-in a chain uses for a version whose
	// background snapshot starts it (snapMeta.standIn): the version's own
	// committed metadata, whose data file is its delta.
	own *versionMeta
}

// operatorRecord is the operator's record of the version: format 5's
// operator field; for formats 3 and 4, the JSON object of their two
// operator fields as written, {"closedRows":n,"nextWatermarkMs":ms} (each
// only when present), which the operator reads as its oldest record
// format; nil for formats 1 and 2 (no record).
func (m *versionMeta) operatorRecord() []byte {
	switch m.FormatVersion {
	case metaFormatOperator:
		return m.Operator
	case metaFormatClosed, metaFormatWatermark:
		return legacyOperatorRecord(m.LegacyClosedRows, m.LegacyNextWatermarkMs)
	}
	return nil
}

func legacyOperatorRecord(closed int64, wm *int64) []byte {
	b, err := json.Marshal(struct {
		ClosedRows      int64  `json:"closedRows,omitempty"`
		NextWatermarkMs *int64 `json:"nextWatermarkMs,omitempty"`
	}{closed, wm})
	if err != nil {
		panic(fmt.Sprintf("state: marshal legacy operator record: %v", err))
	}
	return b
}

// committed returns the version's own metadata: m, or what m stands in for.
func (m *versionMeta) committed() *versionMeta {
	if m.own != nil {
		return m.own
	}
	return m
}

// keyBounds is the smallest and largest key of a non-empty partition.
type keyBounds struct {
	Min []byte `json:"min"` // JSON: base64
	Max []byte `json:"max"`
}

func (m *versionMeta) ref() versionRef { return versionRef{m.Version, m.Attempt} }

func encodeMeta(m *versionMeta) []byte { return encodeFrame(metaHeader, m) }

// encodeFrame writes the frame shared by .meta and .snapmeta files (header
// line, JSON line, CRC line; frameBody reads it). The values are the
// package's own structs: a marshal error is a bug.
func encodeFrame(header string, v any) []byte {
	js, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("state: marshal %s: %v", header, err))
	}
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteByte('\n')
	b.Write(js)
	b.WriteByte('\n')
	fmt.Fprintf(&b, "crc32c:%08x\n", crc32.Checksum(js, crcTable))
	return b.Bytes()
}

func decodeMeta(b []byte) (*versionMeta, error) {
	body, err := metaBody(b)
	if err != nil {
		return nil, err
	}
	m := &versionMeta{}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(m); err != nil {
		return nil, fmt.Errorf("parse metadata json: %w", err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// metaBody checks a metadata file's frame (header line, JSON line, CRC
// line) and returns its JSON line.
func metaBody(b []byte) (string, error) {
	return frameBody(b, metaHeader, "ethstream-state-meta v")
}

// frameBody checks the frame shared by .meta and .snapmeta files (header
// line, JSON line, CRC line) and returns the JSON line. A header that
// starts with family but is not header is a newer format, refused as such.
func frameBody(b []byte, header, family string) (string, error) {
	lines := strings.Split(string(b), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return "", fmt.Errorf("want 3 newline-terminated lines, found %d", len(lines)-1)
	}
	if lines[0] != header {
		if strings.HasPrefix(lines[0], family) {
			return "", fmt.Errorf("unsupported metadata format %q (this build reads %q)", lines[0], header)
		}
		return "", fmt.Errorf("bad header line %q", lines[0])
	}
	crcHex, ok := strings.CutPrefix(lines[2], "crc32c:")
	if !ok {
		return "", fmt.Errorf("bad checksum line %q", lines[2])
	}
	crc, err := strconv.ParseUint(crcHex, 16, 32)
	if err != nil || len(crcHex) != 8 {
		return "", fmt.Errorf("bad checksum line %q", lines[2])
	}
	if got := crc32.Checksum([]byte(lines[1]), crcTable); uint32(crc) != got {
		return "", fmt.Errorf("checksum mismatch: stored %08x, computed %08x", crc, got)
	}
	return lines[1], nil
}

// check validates a decoded metadata record against its format version,
// its counts, its kind and its file name.
func (m *versionMeta) check() error {
	// Which optional field each format requires (r) or allows (a):
	//
	//	format         1  2  3  4  5
	//	partitionKeys  -  r  r  r  r
	//	closedRows     -  -  r  a  -
	//	nextWmMs       -  -  -  r  -
	//	operator       -  -  -  -  r
	f := m.FormatVersion
	if f < 1 || f > metaFormatOperator {
		return fmt.Errorf("unsupported metadata formatVersion %d", f)
	}
	if (f == metaFormatClosed) != (m.LegacyClosedRows > 0) && f != metaFormatWatermark {
		return fmt.Errorf("closedRows %d in a formatVersion %d file", m.LegacyClosedRows, f)
	}
	if (f == metaFormatWatermark) != (m.LegacyNextWatermarkMs != nil) {
		return fmt.Errorf("nextWatermarkMs present %v in a formatVersion %d file", m.LegacyNextWatermarkMs != nil, f)
	}
	if (f == metaFormatOperator) != (len(m.Operator) > 0) || len(m.Operator) > maxOperatorRecord {
		return fmt.Errorf("operator record of %d bytes in a formatVersion %d file", len(m.Operator), f)
	}
	switch f {
	case 1:
		if m.PartitionKeys != nil {
			return errors.New("partitionKeys in a formatVersion 1 file")
		}
	default:
		if len(m.PartitionKeys) != m.Partitions {
			return fmt.Errorf("partitionKeys has %d entries for %d partitions", len(m.PartitionKeys), m.Partitions)
		}
		for p, b := range m.PartitionKeys {
			if b == nil {
				continue
			}
			if p < len(m.PartitionRows) && m.PartitionRows[p] == 0 {
				return fmt.Errorf("key bounds for empty partition %d", p)
			}
			if bytes.Compare(b.Min, b.Max) > 0 {
				return fmt.Errorf("bad key bounds for partition %d", p)
			}
		}
	}
	if m.Version < 0 || m.Attempt < 0 || m.Partitions <= 0 || m.Partitions > maxPartitions ||
		len(m.PartitionRows) != m.Partitions || m.DataSize < headerLen || m.DataRecords < 0 || m.Rows < 0 || m.LegacyClosedRows < 0 {
		return errors.New("metadata fields out of range")
	}
	var sum int64
	for _, r := range m.PartitionRows {
		if r < 0 {
			return errors.New("negative partition row count")
		}
		sum += r
	}
	if sum != m.Rows {
		return fmt.Errorf("partition rows sum to %d, rows says %d", sum, m.Rows)
	}
	switch m.Kind {
	case kindNameSnapshot:
		if m.Base != nil {
			return errors.New("snapshot with a base")
		}
	case kindNameDelta:
		if m.Base != nil && m.Base.Version >= m.Version {
			return fmt.Errorf("delta version %d based on version %d", m.Version, m.Base.Version)
		}
	default:
		return fmt.Errorf("unknown kind %q", m.Kind)
	}
	if m.Data != dataFileName(m.Version, m.Attempt, m.Kind) {
		return fmt.Errorf("data file name %q does not match version %d attempt %d", m.Data, m.Version, m.Attempt)
	}
	if err := m.Schema.validate(); err != nil {
		return err
	}
	return nil
}

// File names (doc.go): <version:020d>.<attempt>.{meta,delta,snap,snapmeta}.
func metaFileName(v int64, attempt int) string { return fmt.Sprintf("%020d.%d.meta", v, attempt) }

func dataFileName(v int64, attempt int, kind string) string {
	if kind == kindNameSnapshot {
		return fmt.Sprintf("%020d.%d.snap", v, attempt)
	}
	return fmt.Sprintf("%020d.%d.delta", v, attempt)
}

// parseFileName splits a state file name into version, attempt and suffix.
func parseFileName(name string) (v int64, attempt int, suffix string, ok bool) {
	parts := strings.Split(name, ".")
	if len(parts) != 3 || len(parts[0]) != 20 {
		return 0, 0, "", false
	}
	v, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || v < 0 {
		return 0, 0, "", false
	}
	a, err := strconv.Atoi(parts[1])
	if err != nil || a < 0 || strconv.Itoa(a) != parts[1] {
		return 0, 0, "", false
	}
	switch parts[2] {
	case "meta", "delta", "snap", "snapmeta":
		return v, a, parts[2], true
	}
	return 0, 0, "", false
}

// MarshalJSON writes the type by name ("int64", "timestamp", ...), and
// "nullable":true only for a nullable field (so a schema without one is
// written as before nullable fields existed).
func (f Field) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Nullable bool   `json:"nullable,omitempty"`
	}{f.Name, f.Type.String(), f.Nullable})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *Field) UnmarshalJSON(b []byte) error {
	var x struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Nullable bool   `json:"nullable"`
	}
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	if t, ok := stream.ParseType(x.Type); ok && encClass(t) != 0 {
		f.Name, f.Type, f.Nullable = x.Name, t, x.Nullable
		return nil
	}
	return fmt.Errorf("unknown field type %q", x.Type)
}
