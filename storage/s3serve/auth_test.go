package s3serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

func startS3(t *testing.T, o Options) *Server {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	srv, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// signedClient signs with ak/sk; transport, when set, carries the requests.
func signedClient(url, ak, sk string, transport http.RoundTripper) *s3.Client {
	o := s3.Options{
		BaseEndpoint: aws.String(url),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(ak, sk, ""),
		// The SDK's retries would hide how each request was answered.
		RetryMaxAttempts: 1,
	}
	if transport != nil {
		o.HTTPClient = &http.Client{Transport: transport}
	}
	return s3.New(o)
}

// errCode returns the S3 error code and HTTP status of err.
func errCode(err error) (string, int) {
	var ae smithy.APIError
	var re interface{ HTTPStatusCode() int }
	code, st := "", 0
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	if errors.As(err, &re) {
		st = re.HTTPStatusCode()
	}
	return code, st
}

// swapBody replaces every PUT body, after the SDK signed it, with as many
// other bytes: a body tampered with on the way under a valid signature.
type swapBody struct{}

func (swapBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(bytes.Repeat([]byte("X"), len(b))))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestS3SigV4: started with credentials, the embedded endpoint serves a
// client that signs with them (PUT, GET, LIST, DELETE), and answers 403
// to an unsigned request (AccessDenied), another access key
// (InvalidAccessKeyId) and another secret (SignatureDoesNotMatch); a body
// swapped under a valid signature is refused and not stored. Without
// credentials it says it is unauthenticated and serves anyone.
func TestS3SigV4(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "lake"), 0o755); err != nil {
		t.Fatal(err)
	}
	const ak, sk = "ethstream-key", "ethstream-secret"
	srv := startS3(t, Options{Root: root, AccessKey: ak, SecretKey: sk})
	if !srv.Authenticated() {
		t.Fatal("started with credentials, the endpoint says it is unauthenticated")
	}
	ctx := context.Background()
	good := signedClient(srv.URL(), ak, sk, nil)
	if _, err := good.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("dir/a b+c.txt"), Body: strings.NewReader("payload")}); err != nil {
		t.Fatalf("signed PUT: %v", err)
	}
	out, err := good.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String("dir/a b+c.txt"), Range: aws.String("bytes=1-3")})
	if err != nil {
		t.Fatalf("signed GET: %v", err)
	}
	if b, _ := io.ReadAll(out.Body); string(b) != "ayl" {
		t.Fatalf("signed GET read %q", b)
	}
	out.Body.Close()
	if l, err := good.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String("dir/")}); err != nil || len(l.Contents) != 1 {
		t.Fatalf("signed LIST: %v", err)
	}

	for _, c := range []struct {
		name   string
		client *s3.Client
		code   string
	}{
		{"unsigned", s3Client(srv.URL(), true), "AccessDenied"},
		{"unknown key", signedClient(srv.URL(), "someone-else", sk, nil), "InvalidAccessKeyId"},
		{"wrong secret", signedClient(srv.URL(), ak, "not-the-secret", nil), "SignatureDoesNotMatch"},
	} {
		_, err := c.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String("dir/a b+c.txt")})
		if code, st := errCode(err); code != c.code || st != http.StatusForbidden {
			t.Errorf("%s GET: %v (code %q, status %d), want 403 %s", c.name, err, code, st, c.code)
		}
		_, err = c.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("evil"), Body: strings.NewReader("x")})
		if code, st := errCode(err); code != c.code || st != http.StatusForbidden {
			t.Errorf("%s PUT: %v (code %q, status %d), want 403 %s", c.name, err, code, st, c.code)
		}
		_, err = c.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("lake"), Key: aws.String("dir/a b+c.txt")})
		if code, _ := errCode(err); code != c.code {
			t.Errorf("%s DELETE: %v, want %s", c.name, err, c.code)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "lake", "evil")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused PUT was stored: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "lake", "dir", "a b+c.txt")); err != nil {
		t.Fatalf("a refused DELETE removed the object: %v", err)
	}

	tampered := signedClient(srv.URL(), ak, sk, swapBody{})
	_, err = tampered.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("swapped"), Body: strings.NewReader("original")})
	if err == nil {
		t.Fatal("a body swapped under a valid signature was accepted")
	}
	if _, err := os.Stat(filepath.Join(root, "lake", "swapped")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a swapped body was stored: %v", err)
	}
	if _, err := good.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("lake"), Key: aws.String("dir/a b+c.txt")}); err != nil {
		t.Fatalf("signed DELETE: %v", err)
	}

	open := startS3(t, Options{Root: root})
	if open.Authenticated() {
		t.Fatal("started without credentials, the endpoint says it authenticates")
	}
	if _, err := Start(ctx, Options{Root: root, Addr: "127.0.0.1:0", AccessKey: ak}); err == nil {
		t.Fatal("an access key without a secret was accepted")
	}
}

// TestS3SymlinkContained: the endpoint serves links that stay inside its
// root (relative or absolute, to a file or a directory) and refuses, with
// 403 AccessDenied, every key whose path leaves the root through a link
// (issue 28: "a symlink inside the served root: followed"): no GET or
// HEAD of a file outside, no PUT or DELETE through a linked directory, and
// a listing shows no linked entry.
func TestS3SymlinkContained(t *testing.T) {
	root, outsideDir := t.TempDir(), t.TempDir()
	writeTree(t, root, map[string]string{"lake/in.txt": "inside", "lake/sub/deep.txt": "deep"})
	writeTree(t, outsideDir, map[string]string{"secret.txt": "secret"})
	for link, target := range map[string]string{
		"lake/rel-in":  "in.txt",
		"lake/abs-in":  filepath.Join(root, "lake", "in.txt"),
		"lake/dir-in":  "sub",
		"lake/out":     filepath.Join(outsideDir, "secret.txt"),
		"lake/rel-out": "../../" + filepath.Base(outsideDir) + "/secret.txt",
		"lake/dir-out": outsideDir,
		"lake/dangle":  filepath.Join(outsideDir, "not-yet"),
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	srv := startS3(t, Options{Root: root})
	c := s3Client(srv.URL(), true)
	ctx := context.Background()
	get := func(key string) (string, error) {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String(key)})
		if err != nil {
			return "", err
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		return string(b), err
	}
	for key, want := range map[string]string{"in.txt": "inside", "rel-in": "inside", "abs-in": "inside", "dir-in/deep.txt": "deep"} {
		if got, err := get(key); err != nil || got != want {
			t.Errorf("GET %s = %q, %v; want %q", key, got, err, want)
		}
	}
	refused := func(op, key string, err error) {
		t.Helper()
		if code, st := errCode(err); code != "AccessDenied" || st != http.StatusForbidden {
			t.Errorf("%s %s: %v (code %q, status %d), want 403 AccessDenied", op, key, err, code, st)
		}
	}
	for _, key := range []string{"out", "rel-out", "dir-out/secret.txt"} {
		_, err := get(key)
		refused("GET", key, err)
		_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("lake"), Key: aws.String(key)})
		if _, st := errCode(err); st != http.StatusForbidden {
			t.Errorf("HEAD %s: %v, want 403", key, err)
		}
	}
	for _, key := range []string{"dir-out/new.txt", "dangle/x", "dangle"} {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key), Body: strings.NewReader("x")})
		refused("PUT", key, err)
	}
	_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("lake"), Key: aws.String("dir-out/secret.txt")})
	refused("DELETE", "dir-out/secret.txt", err)
	if b, err := os.ReadFile(filepath.Join(outsideDir, "secret.txt")); err != nil || string(b) != "secret" {
		t.Fatalf("the file outside the root was changed: %q, %v", b, err)
	}
	for _, p := range []string{filepath.Join(outsideDir, "new.txt"), filepath.Join(outsideDir, "not-yet")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a PUT through a link wrote %s", p)
		}
	}
	keys, _, _ := listAll(t, c, "lake", "", "", 0)
	if strings.Join(keys, ",") != "in.txt,sub/deep.txt" {
		t.Fatalf("listing = %v, want only the regular files", keys)
	}
}
