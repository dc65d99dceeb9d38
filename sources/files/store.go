package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/sinklog"
	"github.com/ethstream/ethstream/sources/internal/filelog"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/stream"
)

// CodeFailedReadFile is Spark's error class for a data file that cannot be
// read (FAILED_READ_FILE): missing, truncated, not of the format.
const CodeFailedReadFile = "FAILED_READ_FILE"

// listed is one data file with its path below the root.
type listed struct {
	filelog.Object
	rel string // "/"-separated path below the root
}

// store lists and reads the files under a location. Safe for concurrent use.
type store interface {
	// list returns every file under the root (names starting with "_" or
	// "." skipped in every component, as Spark's InMemoryFileIndex skips
	// them), in no particular order.
	list(ctx context.Context) ([]listed, error)
	// read returns the whole file named by uri (size bytes as listed).
	read(ctx context.Context, uri string, size int64) ([]byte, error)
	// root is the location as a URI.
	root() string
}

// hidden reports whether a path component is one Spark's file index skips.
func hidden(name string) bool {
	return strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".")
}

type counters struct {
	requests, bytesRead, retries, throttles atomic.Int64
}

// localStore reads a directory through fs.
type localStore struct {
	fs  vfs.FS
	dir string
	c   *counters
}

func (s *localStore) root() string { return fileURI(s.dir) }

func fileURI(p string) string { return (&url.URL{Scheme: "file", Path: filepath.ToSlash(p)}).String() }

func (s *localStore) list(ctx context.Context) ([]listed, error) {
	if _, err := s.fs.Stat(s.fs.PathJoin(s.dir, sinklog.MetadataDir)); err == nil {
		return s.listSinkLog()
	}
	var out []listed
	if err := s.walk(ctx, s.dir, "", &out); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, errcode.Wrap(err, CodeFailedReadFile, s.root(), "check that the directory exists and is readable", "list %s", s.root())
	}
	return out, nil
}

// listSinkLog lists the files a file sink committed: a directory holding
// _spark_metadata is read as Spark's FileStreamSource reads one
// (MetadataLogFileIndex), through the sink's log only, so the part files
// of a batch that crashed before its commit are never read. Unlike
// Spark, which uses the logged absolute paths, a file is looked up by its
// name in the directory, so an output moved as a whole still reads.
func (s *localStore) listSinkLog() ([]listed, error) {
	s.c.requests.Add(1)
	c, err := sinklog.ReadLog(s.fs, s.dir)
	if err != nil {
		return nil, err
	}
	out := make([]listed, 0, len(c.Files))
	for _, f := range c.Files {
		if f.IsDir {
			continue
		}
		name := path.Base(f.Path)
		out = append(out, listed{Object: filelog.Object{URI: fileURI(s.fs.PathJoin(s.dir, name)), Size: f.Size,
			ModTime: time.UnixMilli(f.ModificationTime)}, rel: name})
	}
	return out, nil
}

func (s *localStore) walk(ctx context.Context, dir, rel string, out *[]listed) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.c.requests.Add(1)
	infos, err := storage.ListInfo(s.fs, dir, func(name string) bool { return !hidden(name) })
	if err != nil {
		if rel != "" && errors.Is(err, os.ErrNotExist) {
			return nil // removed while listed
		}
		return err
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	for _, info := range infos {
		name := info.Name()
		p, r := s.fs.PathJoin(dir, name), path.Join(rel, name)
		if info.IsDir() {
			if err := s.walk(ctx, p, r, out); err != nil {
				return err
			}
			continue
		}
		*out = append(*out, listed{Object: filelog.Object{URI: fileURI(p), Size: info.Size(), ModTime: info.ModTime()}, rel: r})
	}
	return nil
}

func (s *localStore) read(ctx context.Context, uri string, size int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" {
		return nil, fmt.Errorf("not a file uri: %q", uri)
	}
	f, err := s.fs.Open(filepath.FromSlash(u.Path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s.c.requests.Add(1)
	data, err := io.ReadAll(f)
	s.c.bytesRead.Add(int64(len(data)))
	return data, err
}

// s3Store reads s3://bucket/prefix through storage.Objects (its retries on
// the engine's clock and its error classification).
type s3Store struct {
	obj    *storage.Objects
	prefix string // "" or ending in "/"
}

func newS3Store(ctx context.Context, o Options, c *counters, clock func() stream.Clock) (*s3Store, error) {
	u, err := url.Parse(o.URI)
	if err != nil {
		return nil, err
	}
	obj, err := storage.NewObjects(ctx, storage.ObjectsOptions{
		Conn: o.Conn, Bucket: u.Host,
		Clock:    func() storage.Clock { return clock() },
		Counters: storage.Counters{Requests: &c.requests, Retries: &c.retries, Throttles: &c.throttles},
	})
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &s3Store{obj: obj, prefix: prefix}, nil
}

func (s *s3Store) root() string { return strings.TrimSuffix(s3URI(s.obj.Bucket(), s.prefix), "/") }

// s3URI is the URI of key as the source log records it (URL-encoded, as
// Spark's paths are).
func s3URI(bucket, key string) string {
	return (&url.URL{Scheme: "s3", Host: bucket, Path: "/" + key}).String()
}

func (s *s3Store) list(ctx context.Context) ([]listed, error) {
	var out []listed
	err := s.obj.List(ctx, s.prefix, "", 0, 0, func(page []storage.ObjectInfo) error {
		for _, o := range page {
			rel := strings.TrimPrefix(o.Key, s.prefix)
			skip := rel == "" || strings.HasSuffix(rel, "/")
			for _, part := range strings.Split(rel, "/") {
				skip = skip || hidden(part)
			}
			if !skip {
				out = append(out, listed{Object: filelog.Object{URI: s3URI(s.obj.Bucket(), o.Key), Size: o.Size, ModTime: o.ModTime}, rel: rel})
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return out, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case storage.IsStoreFailure(err) || errcode.Code(err) != "":
		return nil, err
	}
	return nil, errcode.New(CodeFailedReadFile, s.root(), "check the bucket, the endpoint and the credentials", "cannot list %s: %s", s.root(), storage.Reason(err))
}

func (s *s3Store) read(ctx context.Context, uri string, size int64) ([]byte, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "s3" || u.Host != s.obj.Bucket() {
		return nil, fmt.Errorf("%s is not in bucket %s", uri, s.obj.Bucket())
	}
	key := strings.TrimPrefix(u.Path, "/")
	data, body, _, cancel, err := s.obj.GetObject(ctx, key, max(size, 1))
	defer cancel()
	if err != nil {
		return nil, err
	}
	if body != nil { // the object grew past its listed size
		defer body.Close()
		rest, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		data = append(data, rest...)
	}
	return data, nil
}
