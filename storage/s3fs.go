package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/internal/s3client"
)

// DefaultRegion is used when neither the location nor the environment names one.
const DefaultRegion = s3client.DefaultRegion

// memoryReadLimit: an object up to this size is read whole on Open and its
// ReadAt calls are served from memory (checkpoint entries, Delta commits,
// state files of a small query); a larger one is read by ranged GETs.
const memoryReadLimit = 8 << 20

// bucketFS is a vfs.FS and a durable.Publisher over one S3 bucket. Paths are
// s3://bucket/key ('/'-separated); a "directory" is a key prefix ending in
// '/', which exists while an object lives under it (MkdirAll writes
// nothing). Every request goes through obj (retries, classification).
// Safe for concurrent use.
type bucketFS struct {
	bucket string
	obj    *Objects
	// ctx is the context of every request: a vfs call carries none. It
	// keeps NewFS's values but not its cancellation, so that a stopping
	// command still completes the publish or lease release under way;
	// each attempt is bounded by the store's request timeout.
	ctx      context.Context
	leaseTTL time.Duration
	now      func() time.Time
	// spoolDir holds the temp files of objects too large to stage in
	// memory before their PUT ("" = os.TempDir()).
	spoolDir string
	// listPage caps the keys per LIST page (0 = the server's, 1,000 on
	// AWS); tests lower it to exercise paging.
	listPage int32

	mu     sync.Mutex
	leases map[string]*lease // by the root (checkpoint path) they guard
}

var (
	_ vfs.FS            = (*bucketFS)(nil)
	_ durable.Publisher = (*bucketFS)(nil)
	_ infoLister        = (*bucketFS)(nil)
)

func newBucketFS(ctx context.Context, o S3Options) (*bucketFS, error) {
	obj, err := NewObjects(ctx, ObjectsOptions{Bucket: o.Bucket,
		Conn: s3client.Conn{Endpoint: o.Endpoint, Region: o.Region, Anonymous: o.Anonymous, PathStyle: o.PathStyle}})
	if err != nil {
		return nil, err
	}
	ttl := o.LeaseTTL
	if ttl == 0 {
		ttl = DefaultLeaseTTL
	}
	return &bucketFS{bucket: o.Bucket, obj: obj, ctx: context.WithoutCancel(ctx), leaseTTL: ttl, now: time.Now, leases: map[string]*lease{}}, nil
}

// key returns the object key of an s3://bucket/... path.
func (b *bucketFS) key(p string) string {
	rest := strings.TrimPrefix(p, "s3://"+b.bucket)
	return strings.Trim(path.Clean("/"+rest), "/")
}

func (b *bucketFS) path(key string) string { return b.obj.URI(key) }

// put writes data under key; ifNoneMatch makes it a put-if-absent whose lost
// race (412) is durable.ErrExists.
func (b *bucketFS) put(key string, data []byte, ifNoneMatch bool) error {
	return b.obj.Put(b.ctx, key, func() io.ReadSeeker { return bytes.NewReader(data) }, int64(len(data)), ifNoneMatch)
}

// Publish implements durable.Publisher: NoOverwrite is a PUT with
// If-None-Match: * (412 = durable.ErrExists), Replace a plain PUT; both are
// atomic in S3, so no temp object is written. The content is staged first
// (an S3 PUT needs its length): in memory up to spoolLimit, beyond that in a
// local temp file, so memory stays bounded whatever the size. Under a
// checkpoint whose lease this process holds, a publish is refused once the
// lease is lost or expired.
func (b *bucketFS) Publish(dir, name string, o durable.Options, write func(w io.Writer) error) (durable.Result, error) {
	key := b.key(dir + "/" + name)
	if err := b.checkLease(key); err != nil {
		return durable.Result{}, err
	}
	sp := &spool{dir: b.spoolDir}
	defer sp.Close()
	werr := write(sp)
	if o.Wait != nil {
		werr = errors.Join(werr, o.Wait())
	}
	if werr != nil {
		return durable.Result{}, fmt.Errorf("write %s: %w", b.path(key), werr)
	}
	if err := b.obj.Put(b.ctx, key, sp.body, sp.size, o.Mode == durable.NoOverwrite); err != nil {
		return durable.Result{}, err
	}
	return durable.Result{Size: sp.size, Visible: true}, nil
}

// Create returns a file whose bytes are PUT (replacing) on Sync or Close,
// staged like a publish's (memory up to spoolLimit, then a temp file).
func (b *bucketFS) Create(name string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return &createFile{fs: b, key: b.key(name), sp: spool{dir: b.spoolDir}, dirty: true}, nil
}

// OpenReadWrite reads the object (if any) into memory; writes are PUT on
// Sync or Close. Used for append-only informational logs.
func (b *bucketFS) OpenReadWrite(name string, _ vfs.DiskWriteCategory, _ ...vfs.OpenOption) (vfs.File, error) {
	f := &writeFile{fs: b, key: b.key(name)}
	data, err := b.readAll(f.key)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f.buf = data
	return f, nil
}

func (b *bucketFS) readAll(key string) ([]byte, error) {
	data, _, _, _, err := b.obj.GetObject(b.ctx, key, 1<<62)
	return data, err
}

// Open GETs the object: a small one is read whole, a large one keeps its
// body for sequential reads and serves ReadAt by ranged GETs.
func (b *bucketFS) Open(name string, _ ...vfs.OpenOption) (vfs.File, error) {
	key := b.key(name)
	data, body, info, cancel, err := b.obj.GetObject(b.ctx, key, memoryReadLimit)
	if err != nil {
		return nil, err
	}
	f := &readFile{fs: b, key: key, size: info.Size, mod: info.ModTime}
	if body == nil {
		f.data, f.whole = data, true
		return f, nil
	}
	f.body, f.cancel = body, cancel
	return f, nil
}

// OpenDir returns a handle whose Sync is a no-op: an object is durable once
// its PUT returned.
func (b *bucketFS) OpenDir(name string) (vfs.File, error) {
	return &dirFile{name: b.path(b.key(name))}, nil
}

// Remove deletes an object (deleting an absent key succeeds, as in S3).
func (b *bucketFS) Remove(name string) error {
	key := b.key(name)
	if err := b.checkLease(key); err != nil {
		return err
	}
	return b.obj.Delete(b.ctx, key)
}

// RemoveAll deletes the object name and every object under name/.
func (b *bucketFS) RemoveAll(name string) error {
	key := b.key(name)
	keys, err := b.listKeys(key+"/", "")
	if err != nil {
		return err
	}
	if st, err := b.Stat(name); err == nil && !st.IsDir() {
		keys = append(keys, key)
	}
	for _, k := range keys {
		if err := b.Remove(b.path(k)); err != nil {
			return err
		}
	}
	return nil
}

// listKeys lists the keys (with delimiter "/", also the common prefixes,
// without their trailing slash) under prefix.
func (b *bucketFS) listKeys(prefix, delimiter string) ([]string, error) {
	var out []string
	err := b.obj.List(b.ctx, prefix, delimiter, b.listPage, 0, func(page []ObjectInfo) error {
		for _, o := range page {
			out = append(out, o.Key)
		}
		return nil
	})
	return out, err
}

// List returns the names directly under dir (objects and sub-prefixes); an
// empty prefix lists nothing.
func (b *bucketFS) List(dir string) ([]string, error) {
	prefix := b.key(dir)
	if prefix != "" {
		prefix += "/"
	}
	keys, err := b.listKeys(prefix, "/")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		if n := strings.TrimPrefix(k, prefix); n != "" {
			names = append(names, n)
		}
	}
	return names, nil
}

// Stat HEADs the object; a key with objects under it is a directory.
func (b *bucketFS) Stat(name string) (vfs.FileInfo, error) {
	key := b.key(name)
	if key != "" {
		info, err := b.obj.Head(b.ctx, key)
		if err == nil {
			return fileInfo{name: path.Base(key), size: info.Size, mod: info.ModTime}, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	prefix := key
	if prefix != "" {
		prefix += "/"
	}
	found := false
	err := b.obj.List(b.ctx, prefix, "", 1, 1, func(page []ObjectInfo) error {
		found = len(page) > 0
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
	}
	return fileInfo{name: path.Base("/" + key), dir: true}, nil
}

// MkdirAll writes nothing: a prefix exists once an object is put under it.
func (b *bucketFS) MkdirAll(string, os.FileMode) error { return nil }

var errUnsupported = errors.New("not supported on object storage")

func (b *bucketFS) Link(oldname, newname string) error {
	return fmt.Errorf("link %s to %s: %w", oldname, newname, errUnsupported)
}

func (b *bucketFS) Rename(oldname, newname string) error {
	return fmt.Errorf("rename %s to %s: %w", oldname, newname, errUnsupported)
}

func (b *bucketFS) ReuseForWrite(oldname, newname string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fmt.Errorf("reuse %s as %s: %w", oldname, newname, errUnsupported)
}

func (b *bucketFS) GetDiskUsage(p string) (vfs.DiskUsage, error) {
	return vfs.DiskUsage{}, fmt.Errorf("disk usage of %s: %w", p, errUnsupported)
}

func (b *bucketFS) PathBase(p string) string { return s3PathBase(p) }
func (b *bucketFS) PathJoin(elem ...string) string {
	return s3PathJoin(elem...)
}
func (b *bucketFS) PathDir(p string) string { return s3PathDir(p) }
func (b *bucketFS) Unwrap() vfs.FS          { return nil }

// IsS3 reports whether p is an s3:// path.
func IsS3(p string) bool { return strings.HasPrefix(p, "s3://") }

func s3PathJoin(elem ...string) string {
	rest := strings.TrimPrefix(elem[0], "s3://")
	parts := append([]string{"/" + rest}, elem[1:]...)
	return "s3://" + strings.TrimPrefix(path.Join(parts...), "/")
}

func s3PathDir(p string) string {
	rest := strings.Trim(strings.TrimPrefix(p, "s3://"), "/")
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "s3://" + rest
	}
	return "s3://" + rest[:i]
}

func s3PathBase(p string) string {
	rest := strings.Trim(strings.TrimPrefix(p, "s3://"), "/")
	return path.Base("/" + rest)
}

type fileInfo struct {
	name string
	size int64
	mod  time.Time
	dir  bool
}

func (f fileInfo) Name() string       { return f.name }
func (f fileInfo) Size() int64        { return f.size }
func (f fileInfo) ModTime() time.Time { return f.mod }
func (f fileInfo) IsDir() bool        { return f.dir }
func (f fileInfo) Sys() any           { return nil }
func (f fileInfo) Mode() os.FileMode {
	if f.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (f fileInfo) DeviceID() vfs.DeviceID { return vfs.DeviceID{} }
