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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/durable"
	"github.com/ethstream/ethstream/s3client"
)

// DefaultRegion is used when neither the location nor the environment names one.
const DefaultRegion = s3client.DefaultRegion

// requestTimeout bounds one S3 request (vfs calls carry no context).
const requestTimeout = 5 * time.Minute

// memoryReadLimit: an object up to this size is read whole on Open and its
// ReadAt calls are served from memory (checkpoint entries, Delta commits,
// state files of a small query); a larger one is read by ranged GETs.
const memoryReadLimit = 8 << 20

// bucketFS is a vfs.FS and a durable.Publisher over one S3 bucket. Paths are
// s3://bucket/key ('/'-separated); a "directory" is a key prefix ending in
// '/', which exists while an object lives under it (MkdirAll writes
// nothing). Safe for concurrent use.
type bucketFS struct {
	bucket   string
	client   *s3.Client
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
	client, err := s3client.New(ctx, s3client.Conn{Endpoint: o.Endpoint, Region: o.Region, Anonymous: o.Anonymous, PathStyle: o.PathStyle})
	if err != nil {
		return nil, err
	}
	ttl := o.LeaseTTL
	if ttl == 0 {
		ttl = DefaultLeaseTTL
	}
	return &bucketFS{bucket: o.Bucket, client: client, leaseTTL: ttl, now: time.Now, leases: map[string]*lease{}}, nil
}

// key returns the object key of an s3://bucket/... path.
func (b *bucketFS) key(p string) string {
	rest := strings.TrimPrefix(p, "s3://"+b.bucket)
	return strings.Trim(path.Clean("/"+rest), "/")
}

func (b *bucketFS) path(key string) string {
	if key == "" {
		return "s3://" + b.bucket
	}
	return "s3://" + b.bucket + "/" + key
}

func ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), requestTimeout)
}

// httpStatus returns the HTTP status of an S3 error, 0 if none.
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func isNotFound(err error) bool {
	if httpStatus(err) == 404 {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		}
	}
	return false
}

// s3Err turns an S3 failure into an error naming the path, with
// os.ErrNotExist for a missing object so callers treat it as a local miss.
func s3Err(op, p string, err error) error {
	if isNotFound(err) {
		return &os.PathError{Op: op, Path: p, Err: os.ErrNotExist}
	}
	return fmt.Errorf("%s %s: %s", op, p, shortS3Error(err))
}

// shortS3Error is the S3 error without the SDK's operation wrapping.
func shortS3Error(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if st := httpStatus(err); st != 0 {
			return fmt.Sprintf("%s (HTTP %d): %s", ae.ErrorCode(), st, ae.ErrorMessage())
		}
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}

// put writes data under key; ifNoneMatch makes it a put-if-absent whose lost
// race (412) is durable.ErrExists.
func (b *bucketFS) put(key string, data []byte, ifNoneMatch bool) error {
	return b.putBody(key, func() io.ReadSeeker { return bytes.NewReader(data) }, int64(len(data)), ifNoneMatch)
}

// putBody is put of size bytes read from body(), called once per attempt.
func (b *bucketFS) putBody(key string, body func() io.ReadSeeker, size int64, ifNoneMatch bool) error {
	for attempt := 0; ; attempt++ {
		ctx, cancel := ctxTimeout()
		in := &s3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key),
			Body: body(), ContentLength: aws.Int64(size)}
		if ifNoneMatch {
			in.IfNoneMatch = aws.String("*")
		}
		_, err := b.client.PutObject(ctx, in)
		cancel()
		switch st := httpStatus(err); {
		case err == nil:
			return nil
		case ifNoneMatch && st == 412:
			return fmt.Errorf("publish %s: %w", b.path(key), durable.ErrExists)
		case ifNoneMatch && st == 409 && attempt < 5:
			// ConditionalRequestConflict: a conditional write to the same key
			// was in flight; retrying tells whether it won (412) or not.
			time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
			continue
		case ifNoneMatch && st == 0 && b.exists(key):
			// No answer (the connection broke mid-body): servers refuse a
			// taken name before reading the body and may close the
			// connection under a client still sending one, so a lost race
			// can surface as a reset. The key exists, so either another
			// writer won or this PUT landed unseen; it counts as lost, so
			// two writers can never both believe they won.
			return fmt.Errorf("publish %s: %w", b.path(key), durable.ErrExists)
		default:
			return s3Err("put", b.path(key), err)
		}
	}
}

// exists reports whether an object is stored under key (false if the HEAD
// itself fails: the caller then reports its own error).
func (b *bucketFS) exists(key string) bool {
	ctx, cancel := ctxTimeout()
	defer cancel()
	_, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	return err == nil
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
	if err := b.putBody(key, sp.body, sp.size, o.Mode == durable.NoOverwrite); err != nil {
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
	ctx, cancel := ctxTimeout()
	defer cancel()
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, s3Err("get", b.path(key), err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", b.path(key), err)
	}
	return data, nil
}

// Open GETs the object: a small one is read whole, a large one keeps its
// body for sequential reads and serves ReadAt by ranged GETs.
func (b *bucketFS) Open(name string, _ ...vfs.OpenOption) (vfs.File, error) {
	key := b.key(name)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		cancel()
		return nil, s3Err("open", name, err)
	}
	f := &readFile{fs: b, key: key, size: aws.ToInt64(out.ContentLength), mod: aws.ToTime(out.LastModified)}
	if f.size <= memoryReadLimit {
		data, err := io.ReadAll(out.Body)
		out.Body.Close()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		f.data, f.size, f.whole = data, int64(len(data)), true
		return f, nil
	}
	f.body, f.cancel = out.Body, cancel
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
	ctx, cancel := ctxTimeout()
	defer cancel()
	if _, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)}); err != nil {
		return s3Err("delete", name, err)
	}
	return nil
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
	in := &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket), Prefix: aws.String(prefix)}
	if delimiter != "" {
		in.Delimiter = aws.String(delimiter)
	}
	err := b.eachPage(in, func(page *s3.ListObjectsV2Output) {
		for _, o := range page.Contents {
			out = append(out, aws.ToString(o.Key))
		}
		for _, cp := range page.CommonPrefixes {
			out = append(out, strings.TrimSuffix(aws.ToString(cp.Prefix), "/"))
		}
	})
	return out, err
}

// eachPage calls fn with every page of the listing in, each page under a
// deadline of its own.
func (b *bucketFS) eachPage(in *s3.ListObjectsV2Input, fn func(*s3.ListObjectsV2Output)) error {
	p := s3.NewListObjectsV2Paginator(b.client, in)
	for p.HasMorePages() {
		ctx, cancel := ctxTimeout()
		page, err := p.NextPage(ctx)
		cancel()
		if err != nil {
			return s3Err("list", b.path(aws.ToString(in.Prefix)), err)
		}
		fn(page)
	}
	return nil
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
		ctx, cancel := ctxTimeout()
		out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
		cancel()
		if err == nil {
			return fileInfo{name: path.Base(key), size: aws.ToInt64(out.ContentLength), mod: aws.ToTime(out.LastModified)}, nil
		}
		if !isNotFound(err) {
			return nil, s3Err("stat", name, err)
		}
	}
	prefix := key
	if prefix != "" {
		prefix += "/"
	}
	ctx, cancel := ctxTimeout()
	out, err := b.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(1)})
	cancel()
	if err != nil {
		return nil, s3Err("stat", name, err)
	}
	if len(out.Contents) == 0 {
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
