package s3archive

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/s3client"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/stream"
)

// s3Store reads objects under s3://bucket/prefix through the one object
// layer (storage.Objects: its retries on the engine's clock, its error
// classification, its connection pool), counting into the source's
// metrics. It is safe for concurrent use.
type s3Store struct {
	obj      *storage.Objects
	prefix   string // "" or ending in "/"
	pageSize int32
	m        *metrics
	tails    tailModel // the tail the files read so far needed (s3ReadShape)
}

func newS3Store(ctx context.Context, o Options, bucket, prefix string, m *metrics, clock func() stream.Clock) (*s3Store, error) {
	obj, err := storage.NewObjects(ctx, storage.ObjectsOptions{
		Conn:     s3client.Conn{Endpoint: o.Endpoint, Region: o.Region, Anonymous: o.Anonymous, PathStyle: o.PathStyle},
		Bucket:   bucket,
		Clock:    func() storage.Clock { return clock() },
		Timeout:  o.Timeout,
		Counters: storage.Counters{Requests: &m.requests, Retries: &m.retries, Throttles: &m.throttles},
	})
	if err != nil {
		return nil, err
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &s3Store{obj: obj, prefix: prefix, pageSize: int32(o.ListPageSize), m: m}, nil
}

// ProbeStore returns the object store of an s3:// archive, nil for a
// file:// one: a start probes each endpoint once, the archive's with the
// checkpoint's and the table's (storage.Probe), so a dead archive endpoint
// fails the start before anything is written, as a dead checkpoint
// endpoint does.
func (s *Source) ProbeStore() *storage.Objects {
	if st, ok := s.st.(*s3Store); ok {
		return st.obj.ProbedUnder(st.prefix)
	}
	return nil
}

func s3URI(bucket, key string) string {
	u := url.URL{Scheme: "s3", Host: bucket, Path: "/" + key}
	return u.String()
}

func parseS3URI(uri string) (bucket, key string, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return "", "", fmt.Errorf("not an s3 uri: %q", uri)
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), nil
}

const listRemedy = "check the bucket name, the region (s3://aws-public-blockchain is in us-east-2: add region=us-east-2&anonymous=true), the endpoint and the credentials, then restart"

func (s *s3Store) list(ctx context.Context) ([]object, error) {
	var out []object
	bucket := s.obj.Bucket()
	err := s.obj.List(ctx, s.prefix, "", s.pageSize, 0, func(page []storage.ObjectInfo) error {
		for _, o := range page {
			if isDataFile(strings.TrimPrefix(o.Key, s.prefix)) {
				out = append(out, object{URI: s3URI(bucket, o.Key), Size: o.Size, ModTime: o.ModTime})
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
		return nil, err // a cause of its own: a dead endpoint, refused credentials
	}
	where := s3URI(bucket, s.prefix)
	return nil, errcode.New(ArchiveFileUnreadable, where, listRemedy, "cannot list %s: %s", where, storage.Reason(err))
}

// key returns the object key of uri, which must be in this store's bucket.
func (s *s3Store) key(uri string) (string, error) {
	bucket, key, err := parseS3URI(uri)
	if err != nil {
		return "", err
	}
	if bucket != s.obj.Bucket() {
		return "", fmt.Errorf("%s is not in bucket %s", uri, s.obj.Bucket())
	}
	return key, nil
}

func (s *s3Store) size(ctx context.Context, uri string) (int64, error) {
	key, err := s.key(uri)
	if err != nil {
		return 0, err
	}
	info, err := s.obj.Head(ctx, key)
	return info.Size, err
}

// s3ReadShape: over S3 a request costs far more than 128 KiB of bytes
// (footerPrefetch, coalesceGap). A store's tail after its first files is
// the size they needed (tailModel).
var s3ReadShape = readShape{tail: footerPrefetch, gap: coalesceGap}

func (s *s3Store) readShape() readShape {
	sh := s3ReadShape
	sh.tails = &s.tails
	return sh
}

func (s *s3Store) open(_ context.Context, uri string) (objectReader, error) {
	key, err := s.key(uri)
	if err != nil {
		return nil, err
	}
	return &s3Object{s: s, key: key}, nil
}

// s3Object is one object of the bucket; opening it costs no request.
type s3Object struct {
	s   *s3Store
	key string
}

// readRange reads into buf, as localObject.readRange does (and rounds a
// buffer of its own up the same way): over S3 a fresh buffer per range was
// ~870 MB of zeroed garbage in a seed backfill.
func (o *s3Object) readRange(ctx context.Context, off, n int64, buf []byte) ([]byte, error) {
	buf = rangeBuf(buf, n)
	if err := o.s.obj.GetRangeInto(ctx, o.key, off, buf); err != nil {
		return nil, err
	}
	o.s.m.bytesRead.Add(n)
	return buf, nil
}

func (o *s3Object) close() error { return nil }

const timeoutRemedy = "check that the S3 endpoint answers (it accepts connections but did not reply in time), or raise timeout= / batchTimeout= in the source URI"

// errBatchDeadline is the cause of a batch context that ran out of
// BatchTimeout (as opposed to the engine stopping the query).
var errBatchDeadline = errors.New("s3archive batch deadline exceeded")

// deadlineErr turns any error of a batch whose deadline ran out (however it
// surfaced: a request, a wait, a decode) into batchDeadlineErr's.
func deadlineErr(ctx context.Context, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), errBatchDeadline) {
		return err
	}
	var ce *errcode.Error
	if errors.As(err, &ce) && ce.Code == ArchiveFileUnreadable && strings.Contains(ce.Remedy, "batchTimeout") {
		return err
	}
	return batchDeadlineErr(ctx, err)
}

// batchDeadlineErr is what a request returns once ctx ended: a coded error
// with a remedy when the batch deadline ran out, else the context's error.
func batchDeadlineErr(ctx context.Context, last error) error {
	if !errors.Is(context.Cause(ctx), errBatchDeadline) {
		return ctx.Err()
	}
	return errcode.Wrap(last, ArchiveFileUnreadable, "", timeoutRemedy,
		"the archive store did not answer within the batch deadline")
}
