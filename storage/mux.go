package storage

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// Mux is the vfs.FS of a command whose locations mix the local disk and S3:
// s3://bucket/... paths go to that bucket's store, every other path to the
// local FS. It implements durable.Publisher, so durable.For picks each
// store's own publish (link(2) locally, conditional PUT on S3).
type Mux struct {
	local   vfs.FS
	buckets map[string]*bucketFS
	opts    map[string]S3Options
}

var (
	_ vfs.FS            = (*Mux)(nil)
	_ durable.Publisher = (*Mux)(nil)
	_ infoLister        = (*Mux)(nil)
)

// NewFS returns the FS that holds locs: local itself when none is on S3
// (so tests keep their injected FS), else a Mux over local and one S3
// client per bucket. It sends no request. Two locations in one bucket must
// use the same endpoint options.
func NewFS(ctx context.Context, local vfs.FS, locs ...Location) (vfs.FS, error) {
	if local == nil {
		local = vfs.Default
	}
	m := &Mux{local: local, buckets: map[string]*bucketFS{}, opts: map[string]S3Options{}}
	for _, l := range locs {
		if l.Kind != S3 {
			continue
		}
		o := l.S3
		if prev, ok := m.opts[o.Bucket]; ok {
			if !prev.sameEndpoint(o) {
				return nil, errcode.New(errcode.InvalidArgument, l.Path, "give every location in one bucket the same endpoint, region, anonymous and pathStyle options",
					"two locations in bucket %s use different S3 options", o.Bucket)
			}
			if o.LeaseTTL != 0 && prev.LeaseTTL == 0 {
				m.buckets[o.Bucket].leaseTTL = o.LeaseTTL
			}
			continue
		}
		b, err := newBucketFS(ctx, o)
		if err != nil {
			return nil, err
		}
		m.buckets[o.Bucket], m.opts[o.Bucket] = b, o
	}
	if len(m.buckets) == 0 {
		return local, nil
	}
	return m, nil
}

// SetSpoolDir makes the S3 stores stage objects larger than they hold in
// memory in temp files under dir (a local directory, e.g. the state cache's
// --local-dir) instead of os.TempDir(). The files are unlinked once open, so
// nothing is left behind by a crash.
func (m *Mux) SetSpoolDir(dir string) {
	for _, b := range m.buckets {
		b.spoolDir = dir
	}
}

// SetRetryClock makes the S3 stores wait out their retries on c (a
// query's engine clock) instead of the wall clock.
func (m *Mux) SetRetryClock(c Clock) {
	for _, b := range m.buckets {
		b.obj.clock = func() Clock { return c }
	}
}

// route returns the store of path p.
func (m *Mux) route(p string) (vfs.FS, error) {
	if !IsS3(p) {
		return m.local, nil
	}
	bucket, _, _ := strings.Cut(strings.TrimPrefix(p, "s3://"), "/")
	if b, ok := m.buckets[bucket]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("%s: no S3 location of this command is in bucket %s", p, bucket)
}

func (m *Mux) route2(a, b string) (vfs.FS, error) {
	fa, err := m.route(a)
	if err != nil {
		return nil, err
	}
	fb, err := m.route(b)
	if err != nil {
		return nil, err
	}
	if fa != fb {
		return nil, fmt.Errorf("%s and %s are in different stores", a, b)
	}
	return fa, nil
}

// Publish implements durable.Publisher.
func (m *Mux) Publish(dir, name string, o durable.Options, write func(w io.Writer) error) (durable.Result, error) {
	fs, err := m.route(dir)
	if err != nil {
		return durable.Result{}, err
	}
	return durable.For(fs).Publish(dir, name, o, write)
}

func (m *Mux) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	fs, err := m.route(name)
	if err != nil {
		return nil, err
	}
	return fs.Create(name, c)
}

func (m *Mux) Link(oldname, newname string) error {
	fs, err := m.route2(oldname, newname)
	if err != nil {
		return err
	}
	return fs.Link(oldname, newname)
}

func (m *Mux) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	fs, err := m.route(name)
	if err != nil {
		return nil, err
	}
	return fs.Open(name, opts...)
}

func (m *Mux) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	fs, err := m.route(name)
	if err != nil {
		return nil, err
	}
	return fs.OpenReadWrite(name, c, opts...)
}

func (m *Mux) OpenDir(name string) (vfs.File, error) {
	fs, err := m.route(name)
	if err != nil {
		return nil, err
	}
	return fs.OpenDir(name)
}

func (m *Mux) Remove(name string) error {
	fs, err := m.route(name)
	if err != nil {
		return err
	}
	return fs.Remove(name)
}

func (m *Mux) RemoveAll(name string) error {
	fs, err := m.route(name)
	if err != nil {
		return err
	}
	return fs.RemoveAll(name)
}

func (m *Mux) Rename(oldname, newname string) error {
	fs, err := m.route2(oldname, newname)
	if err != nil {
		return err
	}
	return fs.Rename(oldname, newname)
}

func (m *Mux) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	fs, err := m.route2(oldname, newname)
	if err != nil {
		return nil, err
	}
	return fs.ReuseForWrite(oldname, newname, c)
}

func (m *Mux) MkdirAll(dir string, perm os.FileMode) error {
	fs, err := m.route(dir)
	if err != nil {
		return err
	}
	return fs.MkdirAll(dir, perm)
}

func (m *Mux) Lock(name string) (io.Closer, error) {
	fs, err := m.route(name)
	if err != nil {
		return nil, err
	}
	return fs.Lock(name)
}

func (m *Mux) List(dir string) ([]string, error) {
	fs, err := m.route(dir)
	if err != nil {
		return nil, err
	}
	return fs.List(dir)
}

func (m *Mux) Stat(name string) (vfs.FileInfo, error) {
	fs, err := m.route(name)
	if err != nil {
		return nil, err
	}
	return fs.Stat(name)
}

func (m *Mux) PathBase(p string) string {
	if IsS3(p) {
		return s3PathBase(p)
	}
	return m.local.PathBase(p)
}

func (m *Mux) PathJoin(elem ...string) string {
	if len(elem) > 0 && IsS3(elem[0]) {
		return s3PathJoin(elem...)
	}
	return m.local.PathJoin(elem...)
}

func (m *Mux) PathDir(p string) string {
	if IsS3(p) {
		return s3PathDir(p)
	}
	return m.local.PathDir(p)
}

func (m *Mux) GetDiskUsage(p string) (vfs.DiskUsage, error) {
	fs, err := m.route(p)
	if err != nil {
		return vfs.DiskUsage{}, err
	}
	return fs.GetDiskUsage(p)
}

// Unwrap returns the local FS.
func (m *Mux) Unwrap() vfs.FS { return m.local }
