package s3archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/s3client"
	"github.com/ethstream/ethstream/stream"
)

// Retry policy for store requests: full-jitter exponential backoff. The AWS
// SDK's own retryer is disabled so that retries and throttles are counted and
// the backoff sleeps on the engine's clock.
const (
	maxAttempts  = 10
	backoffBase  = 25 * time.Millisecond
	backoffLimit = 5 * time.Second
)

// s3Store reads objects under s3://bucket/prefix. It is safe for concurrent use.
type s3Store struct {
	client   *s3.Client
	bucket   string
	prefix   string // "" or ending in "/"
	pageSize int32
	clock    func() stream.Clock
	m        *metrics
	timeout  time.Duration // per request, body included
}

func newS3Store(ctx context.Context, o Options, bucket, prefix string, m *metrics, clock func() stream.Clock) (*s3Store, error) {
	// The store retries itself, on the engine's clock and with its metrics.
	client, err := s3client.New(ctx, s3client.Conn{Endpoint: o.Endpoint, Region: o.Region, Anonymous: o.Anonymous, PathStyle: o.PathStyle, NoRetries: true})
	if err != nil {
		return nil, err
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &s3Store{client: client, bucket: bucket, prefix: prefix, pageSize: int32(o.ListPageSize), clock: clock, m: m, timeout: o.Timeout}, nil
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

// s3Reason says in a few words why an S3 request failed: the service's
// error code and message, or the transport's last word ("connection
// refused"), without the SDK's operation and request-id wrapping.
func s3Reason(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if msg := ae.ErrorMessage(); msg != "" {
			return ae.ErrorCode() + ": " + msg
		}
		return ae.ErrorCode()
	}
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) && hs.HTTPStatusCode() > 0 {
		return fmt.Sprintf("HTTP status %d", hs.HTTPStatusCode())
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		msg := oe.Err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return "endpoint does not answer (" + msg + ")"
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return "unknown host " + de.Name
	}
	return err.Error()
}

// classify says whether err is worth retrying and whether it is a throttle.
func classify(err error) (retry, throttle bool) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false, false
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "RequestThrottled":
			return true, true
		case "InternalError", "ServiceUnavailable", "RequestTimeout":
			return true, false
		}
	}
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		switch code := hs.HTTPStatusCode(); {
		case code == 503 || code == 429:
			return true, true
		case code >= 500:
			return true, false
		case code > 0:
			return false, false
		}
	}
	// No HTTP answer: a connection refused/reset, a timeout, a truncated body.
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "connection refused") {
		return true, false
	}
	return false, false
}

// do runs op with retries. op must be idempotent.
func (s *s3Store) do(ctx context.Context, op func(context.Context) error) error {
	var err error
	for attempt := 0; ; attempt++ {
		s.m.requests.Add(1)
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		err = op(rctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return batchDeadlineErr(ctx, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return errcode.Wrap(err, ArchiveFileUnreadable, "", timeoutRemedy,
				"the archive store did not answer within timeout=%s", s.timeout)
		}
		retry, throttle := classify(err)
		if throttle {
			s.m.throttles.Add(1)
		}
		if !retry || attempt+1 >= maxAttempts {
			return err
		}
		s.m.retries.Add(1)
		d := min(backoffLimit, backoffBase<<attempt)
		d = d/2 + rand.N(d/2+1) // jitter in [d/2, d]
		if serr := s.clock().Sleep(ctx, d); serr != nil {
			return batchDeadlineErr(ctx, serr)
		}
	}
}

func (s *s3Store) list(ctx context.Context) ([]object, error) {
	var out []object
	var token *string
	for {
		in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix), ContinuationToken: token}
		if s.pageSize > 0 {
			in.MaxKeys = aws.Int32(s.pageSize)
		}
		var page *s3.ListObjectsV2Output
		err := s.do(ctx, func(ctx context.Context) error {
			var err error
			page, err = s.client.ListObjectsV2(ctx, in)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errcode.New(ArchiveFileUnreadable, s3URI(s.bucket, s.prefix), listRemedy, "cannot list %s: %s", s3URI(s.bucket, s.prefix), s3Reason(err))
		}
		for _, c := range page.Contents {
			key := aws.ToString(c.Key)
			if !isDataFile(strings.TrimPrefix(key, s.prefix)) {
				continue
			}
			out = append(out, object{URI: s3URI(s.bucket, key), Size: aws.ToInt64(c.Size), ModTime: aws.ToTime(c.LastModified)})
		}
		if !aws.ToBool(page.IsTruncated) || aws.ToString(page.NextContinuationToken) == "" {
			return out, nil
		}
		token = page.NextContinuationToken
	}
}

func (s *s3Store) size(ctx context.Context, uri string) (int64, error) {
	bucket, key, err := parseS3URI(uri)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.do(ctx, func(ctx context.Context) error {
		h, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return err
		}
		n = aws.ToInt64(h.ContentLength)
		return nil
	})
	return n, err
}

func (s *s3Store) readRange(ctx context.Context, uri string, off, n int64) ([]byte, error) {
	bucket, key, err := parseS3URI(uri)
	if err != nil {
		return nil, err
	}
	var buf []byte
	err = s.do(ctx, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key),
			Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
		})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		b := make([]byte, n)
		k, err := io.ReadFull(out.Body, b)
		s.m.bytesRead.Add(int64(k))
		if err != nil {
			return fmt.Errorf("read body of %s bytes %d-%d: %w", uri, off, off+n-1, err)
		}
		buf = b
		return nil
	})
	return buf, err
}

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
