package s3archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/sources/internal/filelog"
	"github.com/ethstream/ethstream/storage"
)

// object is one listed archive file (the shape every file source lists).
type object = filelog.Object

// store abstracts where archive files live: a local directory or an S3 prefix.
// Implementations are safe for concurrent use.
type store interface {
	// list returns every data file under the root, in no particular order.
	list(ctx context.Context) ([]object, error)
	// size returns the size of the object named by uri.
	size(ctx context.Context, uri string) (int64, error)
	// open returns the object named by uri for the range reads of one
	// decode; the caller closes it when the decode is done.
	open(ctx context.Context, uri string) (objectReader, error)
	// readShape is how the object's bytes are best fetched: the
	// speculative tail read and the widest hole between two projected
	// column chunks that one range read spans (decode.go).
	readShape() readShape
}

// objectReader reads byte ranges of one archive object. It is safe for
// concurrent use (a file's ranges are fetched at once over S3).
type objectReader interface {
	// readRange reads n bytes at off. It reads into buf when buf has
	// room for n bytes (the buffer of an earlier file: fresh zeroed
	// buffers for every range were ~8% of a daily file's decode), else
	// into a buffer of its own.
	readRange(ctx context.Context, off, n int64, buf []byte) ([]byte, error)
	close() error
}

// readShape is a store's cost model for range reads (see footerPrefetch
// and coalesceGap).
type readShape struct {
	tail   int64 // bytes read speculatively from the end of an object
	gap    int64 // widest unprojected hole a range read bridges
	serial bool  // a file's ranges are read one after the other
	// tails, when set, sizes the tail from the files read before
	// (tail.go); tail is then its guess before the first file.
	tails *tailModel
}

var datePartition = regexp.MustCompile(`(?:^|/)date=(\d{4}-\d{2}-\d{2})(?:/|$)`)

// partitionDate returns the YYYY-MM-DD of the date= partition in uri, or "".
func partitionDate(uri string) string {
	u, err := url.Parse(uri)
	p := uri
	if err == nil {
		p = u.Path
	}
	if m := datePartition.FindStringSubmatch(p); m != nil {
		return m[1]
	}
	return ""
}

// sortObjects orders files by date partition, then by URI: the order in which
// they are admitted and read.
func sortObjects(objs []object) {
	dates := make(map[string]string, len(objs))
	for _, o := range objs {
		dates[o.URI] = partitionDate(o.URI)
	}
	sort.SliceStable(objs, func(i, j int) bool {
		di, dj := dates[objs[i].URI], dates[objs[j].URI]
		if di != dj {
			return di < dj
		}
		return objs[i].URI < objs[j].URI
	})
}

// isDataFile reports whether a relative path names a data file: Spark ignores
// names starting with "_" or "." (markers, checksums, temp files) in every
// path component.
func isDataFile(rel string) bool {
	for _, part := range strings.Split(rel, "/") {
		if part == "" || strings.HasPrefix(part, "_") || strings.HasPrefix(part, ".") {
			return false
		}
	}
	return strings.HasSuffix(rel, ".parquet")
}

func fileURI(path string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path)}
	return u.String()
}

// localStore reads a directory tree through fs (the local disk, or the
// fault-injecting FS of a test), so a fault loop reaches the archive's
// listing, opens and reads like every other file of the query. It is safe
// for concurrent use.
type localStore struct {
	fs   vfs.FS
	root string
	m    *metrics
}

func (s *localStore) list(ctx context.Context) ([]object, error) {
	var out []object
	err := s.walk(ctx, s.root, "", &out)
	s.m.requests.Add(1)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, unreadable(err, fileURI(s.root), "list archive directory")
	}
	return out, nil
}

// walk appends the data files under dir (rel: its path below the root) to
// out, skipping the directories Spark skips ("_" or "." names).
func (s *localStore) walk(ctx context.Context, dir, rel string, out *[]object) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	infos, err := storage.ListInfo(s.fs, dir, nil)
	if err != nil {
		return err
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	for _, info := range infos {
		name := info.Name()
		p, r := s.fs.PathJoin(dir, name), path.Join(rel, name)
		if info.IsDir() {
			if strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
				continue
			}
			if err := s.walk(ctx, p, r, out); err != nil {
				return err
			}
			continue
		}
		if !isDataFile(r) {
			continue
		}
		*out = append(*out, object{URI: fileURI(p), Size: info.Size(), ModTime: info.ModTime()})
	}
	return nil
}

func localPath(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" {
		return "", fmt.Errorf("not a file uri: %q", uri)
	}
	return filepath.FromSlash(u.Path), nil
}

func (s *localStore) size(ctx context.Context, uri string) (int64, error) {
	p, err := localPath(uri)
	if err != nil {
		return 0, err
	}
	s.m.requests.Add(1)
	info, err := s.fs.Stat(p)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// localReadShape: a local read costs a syscall (~1 us) and a copy from the
// page cache (~10 us per 100 KiB), so bridging a hole or reading ahead pays
// only for a few KiB; S3's 128 KiB (a daily file's footer is ~10 KiB, its
// timestamp chunk ~8 KiB) copied ~200 KiB per file that nothing decoded.
// Handing a read of a few microseconds to another goroutine costs more
// than it saves, so a file's ranges are read serially.
var localReadShape = readShape{tail: 16 << 10, gap: 16 << 10, serial: true}

func (s *localStore) readShape() readShape { return localReadShape }

// open opens the file once for every range read of a decode: an open and a
// close per range were ~10% of a daily file's decode.
func (s *localStore) open(ctx context.Context, uri string) (objectReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := localPath(uri)
	if err != nil {
		return nil, err
	}
	f, err := s.fs.Open(p)
	if err != nil {
		return nil, err
	}
	return &localObject{f: f, m: s.m}, nil
}

// localObject is an open archive file; vfs.File.ReadAt is safe for
// concurrent use.
type localObject struct {
	f vfs.File
	m *metrics
}

func (o *localObject) readRange(ctx context.Context, off, n int64, buf []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	buf = rangeBuf(buf, n)
	o.m.requests.Add(1)
	k, err := o.f.ReadAt(buf, off)
	if err != nil && !(errors.Is(err, io.EOF) && int64(k) == n) {
		return nil, fmt.Errorf("read %d bytes at %d: %w", n, off, err)
	}
	o.m.bytesRead.Add(n)
	return buf, nil
}

// rangeBuf returns buf[:n] when buf has room for n bytes, else a new
// buffer of n bytes, its capacity rounded up so that the same range of the
// next file (a few bytes longer or shorter) fits it when it comes back.
func rangeBuf(buf []byte, n int64) []byte {
	if int64(cap(buf)) >= n {
		return buf[:n]
	}
	const unit = 16 << 10
	return make([]byte, n, (n+unit-1)/unit*unit)
}

func (o *localObject) close() error { return o.f.Close() }
