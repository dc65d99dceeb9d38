package s3serve

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/johannesboyne/gofakes3"
)

// sigV4 verifies AWS Signature Version 4 on every request to the embedded
// endpoint when it was started with credentials (Options.AccessKey and
// SecretKey). The signature is recomputed with aws-sdk-go-v2's own signer
// over the headers the client says it signed, so what the SDK signs the
// server accepts, and nothing else:
//
//   - no Authorization header (an unsigned or anonymous request, a
//     presigned URL): 403 AccessDenied;
//   - another access key: 403 InvalidAccessKeyId;
//   - a signature that does not match, or a malformed Authorization
//     header: 403 SignatureDoesNotMatch;
//   - X-Amz-Date more than 15 minutes from the server's clock: 403
//     RequestTimeTooSkewed;
//   - a body unlike the SHA-256 the signature covers (X-Amz-Content-Sha256):
//     refused at its end (400 BadDigest), before a PUT publishes anything.
//     UNSIGNED-PAYLOAD is accepted as the client signed it.
//
// Safe for concurrent use.
type sigV4 struct {
	accessKey, secretKey string
	now                  func() time.Time
}

// maxSkew is how far a request's X-Amz-Date may be from the server's clock
// (S3's own limit).
const maxSkew = 15 * time.Minute

const unsignedPayload = "UNSIGNED-PAYLOAD"

// authError is a refusal: the S3 error code and its message.
type authError struct{ code, msg string }

func (e *authError) Error() string { return e.code + ": " + e.msg }

// verify checks r's signature and, when the signature covers the body's
// SHA-256, replaces r.Body with a reader that fails at its end if the body
// differs.
func (v *sigV4) verify(r *http.Request) error {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return &authError{"AccessDenied", "this endpoint requires requests signed with AWS Signature Version 4"}
	}
	const scheme = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, scheme) {
		return &authError{"SignatureDoesNotMatch", "the Authorization header is not AWS4-HMAC-SHA256"}
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(strings.TrimPrefix(auth, scheme), ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
		fields[k] = val
	}
	scope := strings.Split(fields["Credential"], "/") // AK/date/region/service/aws4_request
	if len(scope) != 5 || fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		return &authError{"SignatureDoesNotMatch", "the Authorization header is malformed"}
	}
	if scope[0] != v.accessKey {
		return &authError{"InvalidAccessKeyId", "the access key is not known to this endpoint"}
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || scope[1] != at.Format("20060102") {
		return &authError{"SignatureDoesNotMatch", "X-Amz-Date is missing or disagrees with the credential scope"}
	}
	if d := v.now().Sub(at); d > maxSkew || d < -maxSkew {
		return &authError{"RequestTimeTooSkewed", "the request time differs from the server's by more than 15 minutes"}
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return &authError{"SignatureDoesNotMatch", "X-Amz-Content-Sha256 is missing"}
	}
	// The request as the client signed it: its method, path, query, host,
	// and exactly the headers it names as signed.
	signed := strings.Split(fields["SignedHeaders"], ";")
	u := &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	re := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}}
	for _, h := range signed {
		switch h {
		case "host":
		case "content-length":
			re.ContentLength = r.ContentLength
		default:
			if vals, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
				re.Header[http.CanonicalHeaderKey(h)] = vals
			}
		}
	}
	err = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(r.Context(),
		aws.Credentials{AccessKeyID: v.accessKey, SecretAccessKey: v.secretKey}, re, payload, scope[3], scope[2], at)
	if err != nil {
		return &authError{"SignatureDoesNotMatch", "the signature cannot be recomputed: " + err.Error()}
	}
	want := re.Header.Get("Authorization")
	i := strings.LastIndex(want, "Signature=")
	if i < 0 || !hmac.Equal([]byte(want[i+len("Signature="):]), []byte(fields["Signature"])) ||
		!strings.Contains(want, "SignedHeaders="+fields["SignedHeaders"]+",") {
		return &authError{"SignatureDoesNotMatch", "the request signature we calculated does not match the signature you provided; check your key and signing method"}
	}
	if payload != unsignedPayload && !strings.HasPrefix(payload, "STREAMING-") {
		sum, err := hex.DecodeString(payload)
		if err != nil || len(sum) != sha256.Size {
			return &authError{"SignatureDoesNotMatch", "X-Amz-Content-Sha256 is not a SHA-256"}
		}
		r.Body = &sha256Body{rc: r.Body, h: sha256.New(), want: sum}
	}
	return nil
}

// sha256Body fails at its end (gofakes3.ErrBadDigest) if the bytes read do
// not hash to want: a body swapped under a valid signature is never
// published (a PUT is published only once its body read to the end).
type sha256Body struct {
	rc   io.ReadCloser
	h    hash.Hash
	want []byte
}

func (b *sha256Body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.h.Write(p[:n])
	if errors.Is(err, io.EOF) && !hmac.Equal(b.h.Sum(nil), b.want) {
		return n, gofakes3.ErrBadDigest
	}
	return n, err
}

func (b *sha256Body) Close() error { return b.rc.Close() }
