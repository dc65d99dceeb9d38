package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/internal/s3client"
)

// Codes of an object store that fails for a reason of its own (not a
// missing or damaged file). The local disk's read-only case is
// errcode.ReadOnlyStorage too.
const (
	CodeStorageUnavailable = errcode.StorageUnavailable
	CodeStorageCredentials = errcode.StorageCredentials
	CodeReadOnlyStorage    = errcode.ReadOnlyStorage
)

// Objects is the one S3 client layer of ethstream: ranged GET, paged LIST
// (each entry with its size and time), HEAD, PUT (optionally
// put-if-absent) and DELETE on one bucket, every request retried per Retry on
// an injected clock and every failure judged by Classify. The archive
// source reads through it; the checkpoint and the table reach it through
// the FS of NewFS. Safe for concurrent use.
type Objects struct {
	client   *s3.Client
	bucket   string
	endpoint string // for messages: the custom endpoint, or "AWS S3"
	retry    Retry
	clock    func() Clock
	timeout  time.Duration
	counters Counters
	// probePrefix is where Probe lists ("" the bucket's root).
	probePrefix string
	// ranged sends GetRangeInto's requests (nil: the SDK does).
	ranged *rangeGetter
}

// ObjectsOptions configure NewObjects. Zero fields take the defaults.
type ObjectsOptions struct {
	Conn   s3client.Conn
	Bucket string
	Retry  Retry // DefaultRetry when Attempts is 0
	// Clock is asked for the clock at each wait (so a source can hand its
	// engine's clock over after construction); SystemClock when nil.
	Clock func() Clock
	// Timeout bounds one attempt, its body included; DefaultRequestTimeout
	// when 0.
	Timeout  time.Duration
	Counters Counters
}

// DefaultRequestTimeout bounds one attempt of a request by default.
const DefaultRequestTimeout = 5 * time.Minute

// NewObjects returns the store of o.Bucket. It sends no request; it never
// contacts the EC2 instance-metadata endpoint when o.Conn names a server
// (s3client.New).
func NewObjects(ctx context.Context, o ObjectsOptions) (*Objects, error) {
	conn := o.Conn
	conn.NoRetries = true // retried here, on the injected clock, with counters
	client, err := s3client.New(ctx, conn)
	if err != nil {
		return nil, err
	}
	s := &Objects{client: client, bucket: o.Bucket, endpoint: conn.Endpoint, retry: o.Retry,
		clock: o.Clock, timeout: o.Timeout, counters: o.Counters}
	s.ranged = newRangeGetter(ctx, client, o.Bucket, conn.Anonymous)
	if s.endpoint == "" {
		s.endpoint = "AWS S3"
	}
	if s.retry.Attempts <= 0 {
		s.retry = DefaultRetry
	}
	if s.clock == nil {
		s.clock = func() Clock { return SystemClock{} }
	}
	if s.timeout <= 0 {
		s.timeout = DefaultRequestTimeout
	}
	return s, nil
}

// Bucket returns the bucket the store reads and writes.
func (s *Objects) Bucket() string { return s.bucket }

// URI returns s3://bucket/key.
func (s *Objects) URI(key string) string {
	if key == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + key
}

// ObjectInfo is one listed or HEADed object, or (Dir) a common prefix.
type ObjectInfo struct {
	Key     string // the full key; a prefix without its trailing slash
	Size    int64
	ModTime time.Time
	Dir     bool
}

// do sends fn until it succeeds, fails for good, or the retry budget is
// spent; fn must be idempotent. A failure is the error fail makes of it;
// once ctx is done, an error wrapping ctx.Err().
func (s *Objects) do(ctx context.Context, op, key string, write bool, fn func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		add(s.counters.Requests)
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		err := fn(rctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return &OpError{Op: op, Path: s.URI(key), Class: ClassOther, Err: ctx.Err(), last: err}
		}
		c := Classify(err)
		if c == ClassThrottled {
			add(s.counters.Throttles)
		}
		if !c.Retryable() || attempt >= s.retry.Attempts {
			return s.fail(op, key, write, attempt, c, err)
		}
		add(s.counters.Retries)
		if serr := s.clock().Sleep(ctx, s.retry.backoff(attempt)); serr != nil {
			return &OpError{Op: op, Path: s.URI(key), Class: ClassOther, Err: serr, last: err}
		}
	}
}

// OpError is a failed request that carries no code of its own (a missing
// object, a missing bucket, a refused condition): Error is the operation,
// the object and Reason; the SDK's error stays reachable by errors.As.
type OpError struct {
	Op    string
	Path  string
	Class Class
	Err   error
	last  error // with a done context: the request's own failure
}

func (e *OpError) Error() string {
	if e.last != nil {
		return fmt.Sprintf("%s %s: %v (last error: %s)", e.Op, e.Path, e.Err, Reason(e.last))
	}
	return fmt.Sprintf("%s %s: %s", e.Op, e.Path, Reason(e.Err))
}

func (e *OpError) Unwrap() error { return e.Err }

// credentialsRemedy is the remedy of every missing or refused credential.
const credentialsRemedy = "add anonymous=true to the location for a public bucket or an unauthenticated endpoint, " +
	"or give credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or ~/.aws/credentials"

// fail turns the final failure of a request into its error: a missing
// object is os.ErrNotExist (callers treat it as a local miss), a lost
// put-if-absent durable.ErrExists, and missing or refused credentials, a
// read-only store and a spent retry budget each a coded error naming the
// object, the endpoint and the last answer.
func (s *Objects) fail(op, key string, write bool, attempts int, c Class, err error) error {
	p := s.URI(key)
	if errors.Is(err, durable.ErrExists) {
		return err // Put settled a lost race by a HEAD
	}
	switch c {
	case ClassNotFound:
		return &os.PathError{Op: op, Path: p, Err: os.ErrNotExist}
	case ClassPrecondition:
		return fmt.Errorf("%s %s: %w", op, p, durable.ErrExists)
	case ClassCredentials:
		return errcode.Wrap(&OpError{Op: op, Path: p, Class: c, Err: err}, CodeStorageCredentials, p, credentialsRemedy,
			"the S3 credentials for %s were missing or refused by %s", p, s.endpoint)
	case ClassAccessDenied:
		if write {
			return errcode.Wrap(&OpError{Op: op, Path: p, Class: c, Err: err}, CodeReadOnlyStorage, p,
				"give these credentials write access to the bucket (s3:PutObject, s3:DeleteObject), or use a writable location",
				"%s is read-only to these credentials: %s refused the write", p, s.endpoint)
		}
		return errcode.Wrap(&OpError{Op: op, Path: p, Class: c, Err: err}, CodeStorageCredentials, p, credentialsRemedy,
			"%s refused access to %s", s.endpoint, p)
	case ClassTransient, ClassThrottled:
		return errcode.New(CodeStorageUnavailable, p,
			"check that the endpoint is up and reachable (and not throttling), then start again: the next start resumes from the checkpoint",
			"%s did not serve %s %s after %d attempts; last error: %s", s.endpoint, op, p, attempts, Reason(err))
	}
	return &OpError{Op: op, Path: p, Class: c, Err: err}
}

// GetRangeInto fills p with the len(p) bytes at off of key (a short object
// is an error). The caller owns p, so a reader can hand the same buffers
// from request to request (a fresh zeroed buffer per range was ~870 MB of
// garbage in a seed backfill); a failed attempt may have written part of it.
func (s *Objects) GetRangeInto(ctx context.Context, key string, off int64, p []byte) error {
	n := int64(len(p))
	rng := rangeHeader(off, n)
	if s.ranged != nil {
		return s.do(ctx, "read", key, false, func(ctx context.Context) error {
			return s.ranged.get(ctx, key, off, rng, p)
		})
	}
	return s.do(ctx, "read", key, false, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
			Bucket: aws.String(s.bucket), Key: aws.String(key), Range: &rng,
		})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if _, err := io.ReadFull(out.Body, p); err != nil {
			return fmt.Errorf("read body of bytes %d-%d: %w", off, off+n-1, err)
		}
		return nil
	})
}

// rangeHeader is the Range of n bytes at off, "bytes=off-(off+n-1)".
func rangeHeader(off, n int64) string {
	b := make([]byte, 0, 48)
	b = append(b, "bytes="...)
	b = strconv.AppendInt(b, off, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, off+n-1, 10)
	return string(b)
}

// GetObject starts a GET of key, retried until the server answers. The
// caller reads and closes the body; cancel ends the request (call it
// after Close). An object up to whole bytes is read here, in the retried
// attempt, and returned as data with a nil body.
func (s *Objects) GetObject(ctx context.Context, key string, whole int64) (data []byte, body io.ReadCloser, info ObjectInfo, cancel context.CancelFunc, err error) {
	cancel = func() {}
	err = s.do(ctx, "get", key, false, func(rctx context.Context) error {
		// A body read later must outlive the attempt: it gets a context of
		// its own, bounded by the same timeout.
		bctx, bcancel := context.WithTimeout(ctx, s.timeout)
		out, err := s.client.GetObject(bctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
		if err != nil {
			bcancel()
			return err
		}
		info = ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}
		if info.Size > whole {
			body, cancel = out.Body, bcancel
			return nil
		}
		data, err = io.ReadAll(out.Body)
		out.Body.Close()
		bcancel()
		if err != nil {
			return fmt.Errorf("read body: %w", err)
		}
		info.Size = int64(len(data))
		return nil
	})
	return data, body, info, cancel, err
}

// GetFrom starts a GET of key from byte off to its end, retried until the
// server answers, for a reader whose body broke off (readFile resumes
// there). The caller reads and closes the body, then calls cancel.
func (s *Objects) GetFrom(ctx context.Context, key string, off int64) (body io.ReadCloser, cancel context.CancelFunc, err error) {
	cancel = func() {}
	err = s.do(ctx, "get", key, false, func(rctx context.Context) error {
		bctx, bcancel := context.WithTimeout(ctx, s.timeout)
		out, err := s.client.GetObject(bctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key),
			Range: aws.String(fmt.Sprintf("bytes=%d-", off))})
		if err != nil {
			bcancel()
			return err
		}
		body, cancel = out.Body, bcancel
		return nil
	})
	return body, cancel, err
}

// Head returns the size and time of key.
func (s *Objects) Head(ctx context.Context, key string) (ObjectInfo, error) {
	var info ObjectInfo
	err := s.do(ctx, "stat", key, false, func(ctx context.Context) error {
		out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
		if err != nil {
			return err
		}
		info = ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}
		return nil
	})
	return info, err
}

// List calls fn with each page of the keys under prefix, in key order,
// each object with the size and time the LIST response carries (no HEAD
// per object). With delimiter "/" the common prefixes come as Dir entries.
// pageSize caps the keys per page (0: the server's, 1,000 on AWS); limit,
// when > 0, stops after that many entries.
func (s *Objects) List(ctx context.Context, prefix, delimiter string, pageSize int32, limit int, fn func([]ObjectInfo) error) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)}
	if delimiter != "" {
		in.Delimiter = aws.String(delimiter)
	}
	if pageSize > 0 {
		in.MaxKeys = aws.Int32(pageSize)
	}
	seen := 0
	for {
		var page *s3.ListObjectsV2Output
		err := s.do(ctx, "list", prefix, false, func(ctx context.Context) error {
			var err error
			page, err = s.client.ListObjectsV2(ctx, in)
			return err
		})
		if err != nil {
			return err
		}
		infos := make([]ObjectInfo, 0, len(page.Contents)+len(page.CommonPrefixes))
		for _, o := range page.Contents {
			infos = append(infos, ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
		for _, cp := range page.CommonPrefixes {
			infos = append(infos, ObjectInfo{Key: strings.TrimSuffix(aws.ToString(cp.Prefix), "/"), Dir: true})
		}
		if limit > 0 && seen+len(infos) >= limit {
			return fn(infos[:limit-seen])
		}
		seen += len(infos)
		if err := fn(infos); err != nil {
			return err
		}
		if !aws.ToBool(page.IsTruncated) || aws.ToString(page.NextContinuationToken) == "" {
			return nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

// Put writes size bytes read from body() (called once per attempt, and
// once before them to checksum it) under key. With ifNoneMatch it is a
// put-if-absent ("If-None-Match: *") whose lost race (412) is
// durable.ErrExists; an attempt that gets no answer at all is settled by a
// HEAD (doc.go, Objects): if the key exists the put counts as lost, so two
// writers never both believe they won. Every PUT carries its checksums and
// is read back (verify.go): a store that acknowledged what it does not hold
// is STORAGE_WRITE_LOST.
func (s *Objects) Put(ctx context.Context, key string, body func() io.ReadSeeker, size int64, ifNoneMatch bool) error {
	d, err := digestOf(body())
	if err != nil {
		return fmt.Errorf("put %s: read the body to checksum it: %w", s.URI(key), err)
	}
	if d.size != size {
		return fmt.Errorf("put %s: the body holds %d bytes, not %d", s.URI(key), d.size, size)
	}
	var out *s3.PutObjectOutput
	err = s.do(ctx, "put", key, true, func(rctx context.Context) error {
		in := &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: body(), ContentLength: aws.Int64(size),
			ContentMD5: aws.String(d.md5), ChecksumCRC32C: aws.String(d.crc32c)}
		if ifNoneMatch {
			in.IfNoneMatch = aws.String("*")
		}
		o, err := s.client.PutObject(rctx, in)
		if err != nil && ifNoneMatch && httpStatus(err) == 0 && Classify(err).Retryable() && s.exists(ctx, key) {
			return fmt.Errorf("put %s (no answer, and the key exists): %w", s.URI(key), durable.ErrExists)
		}
		out = o
		return err
	})
	if err != nil {
		return err
	}
	return s.verify(ctx, key, d, out)
}

// exists reports whether key is stored (false if the HEAD fails: the
// caller reports its own error).
func (s *Objects) exists(ctx context.Context, key string) bool {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	add(s.counters.Requests)
	_, err := s.client.HeadObject(rctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	return err == nil
}

// Delete removes key (an absent key succeeds, as in S3).
func (s *Objects) Delete(ctx context.Context, key string) error {
	return s.do(ctx, "delete", key, true, func(ctx context.Context) error {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
		return err
	})
}

// IsStoreFailure reports whether err is an object store's spent retry
// budget (STORAGE_UNAVAILABLE) or missing or refused credentials: causes
// of their own that a caller must pass on as they are, not as a bad file.
func IsStoreFailure(err error) bool {
	var e *errcode.Error
	for errors.As(err, &e) {
		switch e.Code {
		case CodeStorageUnavailable, CodeStorageCredentials:
			return true
		}
		err = e.Err
	}
	return false
}
