package state

// Verifying the checkpoint files a version depends on: at every Open
// (presence, size, header, footer and chunk checksums, without decoding a
// record), fully on demand (every record too, as a rebuild reads them).

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

const footerLen = 16

// checkDataFile checks that the data file named by m exists with m's size,
// that its header verifies and names m's kind, version, attempt and
// partition count, that its footer verifies and counts m's records, and that
// every chunk's length and CRC-32C verify (records are not decoded: the CRC
// pass runs at memory speed). Open runs it over the whole chain of the
// version it loads, before anything is written, so that a cache that
// outlived damage to the checkpoint is never trusted over it.
func checkDataFile(fs vfs.FS, dir string, m *versionMeta) error {
	path := fs.PathJoin(dir, m.Data)
	f, err := fs.Open(path)
	if err != nil {
		return errcode.Corrupt(path, err, "state data file of version %d is missing or unreadable", m.Version)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return errcode.Corrupt(path, err, "stat state data file")
	}
	if st.Size() != m.DataSize {
		return errcode.Corrupt(path, nil, "state data file has %d bytes, its metadata says %d", st.Size(), m.DataSize)
	}
	if m.DataSize < headerLen+footerLen {
		return errcode.Corrupt(path, nil, "state data file has %d bytes, less than a header and a footer", m.DataSize)
	}
	var h [headerLen]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return errcode.Corrupt(path, err, "read state data file header")
	}
	hd, err := parseDataHeader(h[:])
	if err != nil {
		return errcode.Corrupt(path, err, "decode state data file")
	}
	wantKind := byte(kindDelta)
	if m.Kind == kindNameSnapshot {
		wantKind = kindSnapshot
	}
	if hd.Kind != wantKind || hd.Version != m.Version || hd.Attempt != m.Attempt || hd.Partitions != m.Partitions {
		return errcode.Corrupt(path, nil, "state data file header (kind %d version %d attempt %d partitions %d) does not match its metadata",
			hd.Kind, hd.Version, hd.Attempt, hd.Partitions)
	}
	var ft [footerLen]byte
	off := m.DataSize - footerLen
	if _, err := f.ReadAt(ft[:], off); err != nil && !errors.Is(err, io.EOF) {
		return errcode.Corrupt(path, err, "read state data file footer")
	}
	if binary.LittleEndian.Uint32(ft[:4]) != 0 {
		return errcode.Corrupt(path, nil, "no footer at offset %d", off)
	}
	if got, want := binary.LittleEndian.Uint32(ft[12:16]), crc32.Checksum(ft[4:12], crcTable); got != want {
		return errcode.Corrupt(path, nil, "footer checksum mismatch at offset %d", off)
	}
	if c := binary.LittleEndian.Uint64(ft[4:12]); int64(c) != m.DataRecords {
		return errcode.Corrupt(path, nil, "state data file footer counts %d records, its metadata says %d", c, m.DataRecords)
	}
	return checkChunks(path, io.NewSectionReader(f, headerLen, off-headerLen))
}

// checkChunks verifies the chunk sequence between a data file's header and
// its footer: lengths that add up exactly, and each payload's CRC-32C.
func checkChunks(path string, r *io.SectionReader) error {
	br := bufio.NewReaderSize(r, 256<<10)
	var buf []byte
	offset := int64(headerLen)
	end := headerLen + r.Size()
	for offset < end {
		var ch [8]byte
		if _, err := io.ReadFull(br, ch[:]); err != nil {
			return errcode.Corrupt(path, noEOF(err), "read chunk header at offset %d", offset)
		}
		n := int64(binary.LittleEndian.Uint32(ch[:4]))
		if n == 0 || n > maxChunk || offset+8+n > end {
			return errcode.Corrupt(path, nil, "chunk at offset %d declares %d bytes", offset, n)
		}
		buf = slices.Grow(buf[:0], int(n))[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return errcode.Corrupt(path, noEOF(err), "read chunk at offset %d", offset)
		}
		if got, want := binary.LittleEndian.Uint32(ch[4:8]), crc32.Checksum(buf, crcTable); got != want {
			return errcode.Corrupt(path, nil, "chunk checksum mismatch at offset %d: stored %08x, computed %08x", offset, got, want)
		}
		offset += 8 + n
	}
	return nil
}

// checkChain runs checkDataFile over every file of a metadata chain.
func checkChain(fs vfs.FS, dir string, chain []*versionMeta) error {
	for _, m := range chain {
		if err := checkDataFile(fs, dir, m); err != nil {
			return err
		}
	}
	return nil
}

// VerifyReport is the outcome of Verify: the files it read in full.
type VerifyReport struct {
	// Committed lists the committed versions (those with a metadata file)
	// in ascending order, read or not.
	Committed []int64
	Versions  int   // retained committed versions verified
	Files     int   // metadata and data files verified
	Bytes     int64 // bytes read
}

// Verify reads every retained committed version of the state directory dir
// in full: each metadata file, and every chunk and record of each data file
// its chain needs. The first damaged file is CHECKPOINT_CORRUPT naming it.
// committed is the version the checkpoint says is committed (-1 = none): its
// absence is damage too, since a data file without metadata is legal.
func Verify(ctx context.Context, fs vfs.FS, dir string, committed int64) (VerifyReport, error) {
	var rep VerifyReport
	cat, err := listCatalog(fs, dir)
	if err != nil {
		return rep, err
	}
	if _, ok := cat.metas[committed]; committed >= 0 && !ok {
		return rep, errcode.Corrupt(dir, nil, "state version %d is committed in the checkpoint but has no metadata file", committed)
	}
	rep.Committed = cat.versions()
	seen := map[string]bool{}
	for _, v := range rep.Committed {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		chain, err := loadChain(fs, dir, cat, v)
		if err != nil {
			return rep, err
		}
		rep.Versions++
		// A version whose background snapshot starts its chain keeps its
		// own delta too (an older build reads it): verified as well.
		if own := chain[0].own; own != nil {
			chain = append(chain, own)
			if sm := snapMetaFileName(own.Version, own.Attempt); !seen[sm] {
				seen[sm] = true
				rep.Files++ // verified by loadChain
			}
		}
		for _, m := range chain {
			if err := verifyFile(fs, dir, m, seen, &rep); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// verifyFile reads m's metadata and data files in full unless seen
// already, counting them in rep.
func verifyFile(fs vfs.FS, dir string, m *versionMeta, seen map[string]bool, rep *VerifyReport) error {
	meta := metaFileName(m.Version, m.Attempt)
	if !seen[meta] {
		seen[meta] = true
		rep.Files++
	}
	if seen[m.Data] {
		return nil
	}
	seen[m.Data] = true
	if err := readDataFile(fs, dir, m, func(record) error { return nil }); err != nil {
		return err
	}
	rep.Files++
	rep.Bytes += m.DataSize
	return nil
}

// Record is what a committed version's metadata records for others to
// read: the state schema (the query shape records it as well) and the
// operator's record (Store.OperatorRecord), for the operator to read.
type Record struct {
	Path     string // the metadata file
	Schema   Schema
	Operator []byte // nil: none
	// Newest is the newest committed version in dir (-1: none), from the
	// same listing; set even when v has no metadata file.
	Newest int64
}

// ReadRecord reads the metadata of version v's newest attempt in dir,
// writing nothing; ok is false when v has no metadata file (rec holds
// Newest alone then; the caller's own load reports the missing version). A
// damaged file is CHECKPOINT_CORRUPT naming it.
func ReadRecord(fs vfs.FS, dir string, v int64) (rec Record, ok bool, err error) {
	cat, err := listCatalog(fs, dir)
	if err != nil {
		return Record{}, false, err
	}
	newest := int64(-1)
	if vs := cat.versions(); len(vs) > 0 {
		newest = vs[len(vs)-1]
	}
	a, ok := cat.latestAttempt(v)
	if !ok {
		return Record{Newest: newest}, false, nil
	}
	m, err := readMeta(fs, dir, v, a)
	if err != nil {
		return Record{}, false, err
	}
	return Record{Path: fs.PathJoin(dir, metaFileName(v, a)), Schema: m.Schema, Operator: m.operatorRecord(), Newest: newest}, true, nil
}
