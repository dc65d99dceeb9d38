// Package s3test gives tests the S3 servers to run against: the embedded
// endpoint (package storage/s3serve, over a temp directory) always, and Versity
// Gateway, an independent implementation, when .ci/run started one.
//
// Versity's address and keys come from the environment:
//
//	ETHSTREAM_VERSITY_ENDPOINT    http://127.0.0.1:PORT
//	ETHSTREAM_VERSITY_ACCESS_KEY  its root access key
//	ETHSTREAM_VERSITY_SECRET_KEY  its root secret key
//
// Without them the Versity case is skipped locally, and FAILS when CI=true:
// CI must never pass without the independent server.
package s3test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/ethstream/ethstream/storage/s3serve"
)

// Environment variables set by .ci/run for Versity Gateway.
const (
	EnvEndpoint  = "ETHSTREAM_VERSITY_ENDPOINT"
	EnvAccessKey = "ETHSTREAM_VERSITY_ACCESS_KEY"
	EnvSecretKey = "ETHSTREAM_VERSITY_SECRET_KEY"
)

// Server is one S3 endpoint with a fresh bucket.
type Server struct {
	Name     string // "embedded" or "versity"
	Endpoint string
	Bucket   string
	// Query is the location options for this server
	// ("endpoint=...&pathStyle=true" plus anonymous=true where unsigned).
	Query string
	// Client talks to the server with the same credentials.
	Client *s3.Client

	creds aws.CredentialsProvider // Client's (OverTLS builds another)
}

// Location returns s3://bucket/prefix?options for this server.
func (s Server) Location(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?%s", s.Bucket, prefix, s.Query)
}

// at returns s as reached at endpoint (a proxy in front of it).
func (s Server) at(endpoint string) Server {
	s.Query = strings.Replace(s.Query, "endpoint="+url.QueryEscape(s.Endpoint), "endpoint="+url.QueryEscape(endpoint), 1)
	s.Endpoint = endpoint
	return s
}

// Run runs f as a subtest per server.
func Run(t *testing.T, f func(t *testing.T, s Server)) {
	t.Run("embedded", func(t *testing.T) { f(t, Embedded(t)) })
	t.Run("versity", func(t *testing.T) { f(t, Versity(t)) })
}

// Embedded starts the embedded endpoint over a temp directory with one
// bucket; it stops when the test ends.
func Embedded(t testing.TB) Server {
	t.Helper()
	root := t.TempDir()
	bucket := "lake"
	if err := os.Mkdir(filepath.Join(root, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := s3serve.Start(ctx, s3serve.Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		srv.Close()
	})
	return Server{Name: "embedded", Endpoint: srv.URL(), Bucket: bucket,
		Query:  "endpoint=" + url.QueryEscape(srv.URL()) + "&anonymous=true",
		Client: client(t, srv.URL(), aws.AnonymousCredentials{}), creds: aws.AnonymousCredentials{}}
}

// Embedded endpoint credentials of EmbeddedSigned.
const (
	SignedAccessKey = "ethstream-test"
	SignedSecretKey = "ethstream-test-secret"
)

// EmbeddedSigned starts the embedded endpoint verifying SigV4 with
// SignedAccessKey and SignedSecretKey, and sets the AWS credential
// variables for the test (as Versity does), so the code under test signs
// with them; it stops when the test ends.
func EmbeddedSigned(t *testing.T) Server {
	t.Helper()
	root := t.TempDir()
	bucket := "lake"
	if err := os.Mkdir(filepath.Join(root, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := s3serve.Start(context.Background(), s3serve.Options{Root: root, Addr: "127.0.0.1:0",
		AccessKey: SignedAccessKey, SecretKey: SignedSecretKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	creds := credentials.NewStaticCredentialsProvider(SignedAccessKey, SignedSecretKey, "")
	t.Setenv("AWS_ACCESS_KEY_ID", SignedAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SignedSecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	return Server{Name: "embedded-signed", Endpoint: srv.URL(), Bucket: bucket,
		Query:  "endpoint=" + url.QueryEscape(srv.URL()),
		Client: client(t, srv.URL(), creds), creds: creds}
}

// Versity returns the Versity Gateway of .ci/run with a fresh bucket, or
// skips (fails when CI=true) if none is configured. It sets the AWS
// credential variables for the test, so the default credential chain of
// the code under test signs with Versity's keys.
func Versity(t testing.TB) Server {
	t.Helper()
	ep, ak, sk := os.Getenv(EnvEndpoint), os.Getenv(EnvAccessKey), os.Getenv(EnvSecretKey)
	if ep == "" || ak == "" || sk == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s, %s and %s are not all set: .ci/run must start Versity Gateway", EnvEndpoint, EnvAccessKey, EnvSecretKey)
		}
		t.Skipf("%s not set (.ci/run starts Versity Gateway)", EnvEndpoint)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", ak)
	t.Setenv("AWS_SECRET_ACCESS_KEY", sk)
	t.Setenv("AWS_REGION", "us-east-1")
	creds := credentials.NewStaticCredentialsProvider(ak, sk, "")
	c := client(t, ep, creds)
	bucket := fmt.Sprintf("ethstream-test-%016x", rand.Uint64())
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket on Versity Gateway %s: %v", ep, err)
	}
	t.Cleanup(func() { emptyAndDelete(c, bucket) })
	return Server{Name: "versity", Endpoint: ep, Bucket: bucket,
		Query: "endpoint=" + url.QueryEscape(ep), Client: c, creds: creds}
}

func client(t testing.TB, endpoint string, creds aws.CredentialsProvider) *s3.Client {
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"), config.WithCredentialsProvider(creds))
	if err != nil {
		t.Fatal(err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
}

func emptyAndDelete(c *s3.Client, bucket string) {
	ctx := context.Background()
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return
		}
		for _, o := range page.Contents {
			_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key})
		}
	}
	_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
}

// Keys lists every key in the server's bucket under prefix.
func (s Server) Keys(t testing.TB, prefix string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}
