package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsxml "github.com/aws/aws-sdk-go-v2/aws/protocol/xml"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyauth "github.com/aws/smithy-go/auth"
	"github.com/aws/smithy-go/encoding/httpbinding"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// rangeGetter sends the ranged GETs of GetRangeInto beside the SDK's
// operation stack. A backfill reads an archive file by three or more range
// GETs (its footer and its projected column chunks), ~15,000 of them for
// the seed archive, and the SDK's ~30 middlewares, its per-call option
// copies and its ~470 allocations a GET doubled a GET's CPU through the
// embedded endpoint: ~180 us against ~90 us (client and endpoint together,
// BenchmarkGetRangeInto); the seed backfill's reads took 5.95 CPU-s through
// the SDK, 4.35 through the getter (s3archive's BenchmarkBackfillReads).
// Everything that decides what is sent is still the SDK's, taken once
// from the client: the bucket's endpoint from its EndpointResolverV2
// (FIPS, dual-stack, path or virtual host style, a custom endpoint), the
// key's escaping (httpbinding, as its serializer), SigV4 by its signer
// with its S3 options, the credentials from its (cached) provider, its
// HTTP client's dialer, TLS settings and keep-alive (rangeConns sends the
// request on connections of its own; net/http, through the client, where
// rangeConns cannot: a proxy, an answer it does not read itself), and its
// S3 error XML parser.
// A bucket whose endpoint asks for another scheme than SigV4 or none (S3
// Express, multi-region access points' SigV4a) gets no getter, and its
// reads stay on the SDK's path.
//
// The answer is judged as the SDK would (a non-2xx status is a
// *smithy.OperationError over an *awshttp.ResponseError carrying the S3
// error code, so Classify and Reason read it alike), and more strictly
// where a ranged read needs it: a 206 must start at the requested offset
// and hold every byte asked for, and a 200 (a server ignoring Range) is
// accepted only from offset 0.
type rangeGetter struct {
	client aws.HTTPClient
	base   url.URL // the bucket's endpoint: scheme, host and path (path style: "/bucket")
	// signer is nil for anonymous requests.
	signer *v4.Signer
	creds  aws.CredentialsProvider
	name   string // signing name ("s3")
	region string // signing region
	// conns sends the requests on connections of its own (nil: net/http
	// does, through client).
	conns *rangeConns
}

// emptySHA256 is the payload hash of a request without a body, which S3
// requires in X-Amz-Content-Sha256 of a signed request.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// newRangeGetter resolves bucket's endpoint as client would for a
// GetObject; it returns nil (reads stay on the SDK's path) when the
// endpoint does not resolve or asks for an auth scheme other than SigV4
// or none.
func newRangeGetter(ctx context.Context, client *s3.Client, bucket string, anonymous bool) *rangeGetter {
	o := client.Options()
	if o.EndpointResolverV2 == nil || o.HTTPClient == nil || o.UseAccelerate {
		return nil
	}
	p := s3.EndpointParameters{
		Bucket:                         aws.String(bucket),
		Region:                         aws.String(o.Region),
		UseFIPS:                        aws.Bool(o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled),
		UseDualStack:                   aws.Bool(o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled),
		Endpoint:                       o.BaseEndpoint,
		ForcePathStyle:                 aws.Bool(o.UsePathStyle),
		Accelerate:                     aws.Bool(o.UseAccelerate),
		DisableMultiRegionAccessPoints: aws.Bool(o.DisableMultiRegionAccessPoints),
		UseArnRegion:                   aws.Bool(o.UseARNRegion),
		DisableS3ExpressSessionAuth:    o.DisableS3ExpressSessionAuth,
	}
	ep, err := o.EndpointResolverV2.ResolveEndpoint(ctx, p)
	if err != nil || len(ep.Headers) > 0 {
		return nil
	}
	g := &rangeGetter{client: o.HTTPClient, base: ep.URI, name: "s3", region: o.Region, conns: newRangeConns(o.HTTPClient, ep.URI)}
	if opts, ok := smithyauth.GetAuthOptions(&ep.Properties); ok {
		var sigv4 *smithyauth.Option
		for _, a := range opts {
			// The rules name schemes without their namespace ("sigv4",
			// "sigv4a", "sigv4-s3express"); the SDK matches the part after
			// '#' (auth.go matchSchemeID).
			if a.SchemeID == smithyauth.SchemeIDSigV4 || a.SchemeID == "sigv4" {
				sigv4 = a
				break
			}
		}
		if sigv4 == nil {
			return nil
		}
		if n, ok := smithyhttp.GetSigV4SigningName(&sigv4.SignerProperties); ok && n != "" {
			g.name = n
		}
		if r, ok := smithyhttp.GetSigV4SigningRegion(&sigv4.SignerProperties); ok && r != "" {
			g.region = r
		}
	}
	if !anonymous {
		if o.Credentials == nil {
			return nil
		}
		g.creds = o.Credentials
		// The S3 client's own signer options (api_client.go newDefaultV4Signer).
		g.signer = v4.NewSigner(func(so *v4.SignerOptions) { so.DisableURIPathEscaping = true })
	}
	return g
}

// get fills p with the len(p) bytes of key at off: one attempt, the caller
// retries.
func (g *rangeGetter) get(ctx context.Context, key string, off int64, rng string, p []byte) error {
	// The path as the SDK builds it: its serializer's "/{Key+}" joined to
	// the endpoint's path.
	u := g.base
	u.Path = smithyhttp.JoinPath(g.base.Path, "/"+key)
	u.RawPath = smithyhttp.JoinPath(g.base.EscapedPath(), "/"+httpbinding.EscapePath(key, false))
	if g.conns.usable() && g.signer == nil {
		hdr := make([]byte, 0, 96)
		hdr = append(hdr, "Range: "...)
		hdr = append(hdr, rng...)
		hdr = append(hdr, "\r\nAccept-Encoding: identity\r\n"...)
		if err := g.conns.get(ctx, &u, u.Host, hdr, off, p); !errors.Is(err, errFallback) {
			return wrapSend(err)
		}
	}
	req := (&http.Request{Method: http.MethodGet, URL: &u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, 6), Host: u.Host}).WithContext(ctx)
	req.Header["Range"] = []string{rng}
	// Without it net/http would ask for gzip and undo it itself, losing
	// the Content-Length of the range (the SDK's DisableGzip).
	req.Header["Accept-Encoding"] = []string{"identity"}
	if g.signer != nil {
		creds, err := g.creds.Retrieve(ctx)
		if err != nil {
			return err
		}
		req.Header["X-Amz-Content-Sha256"] = []string{emptySHA256}
		if err := g.signer.SignHTTP(ctx, creds, req, emptySHA256, g.name, g.region, time.Now().UTC()); err != nil {
			return &v4.SigningError{Err: err}
		}
		if g.conns.usable() {
			var hdr bytes.Buffer
			if err := req.Header.WriteSubset(&hdr, map[string]bool{"Host": true, "User-Agent": true}); err != nil {
				return err
			}
			// req.Host, not u.Host: the signer drops a default port
			// (":443") from the Host it signs, and net/http sends req.Host.
			if err := g.conns.get(ctx, &u, req.Host, hdr.Bytes(), off, p); !errors.Is(err, errFallback) {
				return wrapSend(err)
			}
		}
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return wrapSend(err)
	}
	defer resp.Body.Close()
	if err := judgeRange(resp.StatusCode, resp.Header.Get("Content-Range"), resp.ContentLength, off, int64(len(p))); err != nil {
		if err == errNotOK {
			return responseError(resp)
		}
		return err
	}
	if _, err := io.ReadFull(resp.Body, p); err != nil {
		return bodyError(off, int64(len(p)), err)
	}
	return nil
}

// errNotOK: an answer whose status is not 2xx; the caller reads its S3
// error (responseError).
var errNotOK = errors.New("not a 2xx answer")

// judgeRange judges the status and headers of the answer to a GET of the
// n bytes at off, on either path (net/http's, rangeConns'): a 206 must
// start at off and a 200 (a server ignoring Range) is accepted only from
// offset 0, holding at least n bytes (length -1: not said).
func judgeRange(status int, contentRange string, length, off, n int64) error {
	switch {
	case status == http.StatusPartialContent:
		if start, ok := rangeStart(contentRange); !ok || start != off {
			return fmt.Errorf("the endpoint answered bytes %d-%d with Content-Range %q", off, off+n-1, contentRange)
		}
	case status == http.StatusOK && off == 0:
		// The whole object: its first n bytes are the range.
	case status/100 == 2:
		return fmt.Errorf("the endpoint ignored the Range of bytes %d-%d (HTTP %d)", off, off+n-1, status)
	default:
		return errNotOK
	}
	if length >= 0 && length < n {
		return fmt.Errorf("the object holds %d bytes at %d, not %d", length, off, n)
	}
	return nil
}

// bodyError is the failure to read the n bytes at off from an answer's body.
func bodyError(off, n int64, err error) error {
	return fmt.Errorf("read body of bytes %d-%d: %w", off, off+n-1, err)
}

// wrapSend is a request's failure to get an answer (a *url.Error) as the
// SDK reports it; other errors pass as they are.
func wrapSend(err error) error {
	if _, ok := err.(*url.Error); ok {
		return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: err}
	}
	return err
}

// rangeStart returns the first byte of a Content-Range "bytes S-E/T".
func rangeStart(h string) (int64, bool) {
	spec, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	first, _, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(first, 10, 64)
	return v, err == nil
}

// maxErrorBody bounds how much of an error answer is read for its code.
const maxErrorBody = 64 << 10

// responseError is the SDK's error of a failed GetObject: the S3 error
// code and message of the body (or, for a body without one, the status
// text as one word, as the SDK names a HEAD's errors), under the response
// and request id, under the operation.
func responseError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	code, msg, reqID := "", "", resp.Header.Get("X-Amz-Request-Id")
	if len(body) > 0 {
		if c, err := awsxml.GetErrorResponseComponents(strings.NewReader(string(body)), true); err == nil {
			code, msg = c.Code, c.Message
			if c.RequestID != "" {
				reqID = c.RequestID
			}
		}
	}
	if code == "" {
		code = strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "")
		if code == "" {
			code = "UnknownError"
		}
	}
	if msg == "" {
		msg = code
	}
	return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: &smithy.GenericAPIError{Code: code, Message: msg}},
		RequestID:     reqID,
	}}
}
