// Package s3client builds the aws-sdk-go-v2 S3 client that every ethstream
// reader and writer of S3 uses (the archive source, the checkpoint and table
// store), so that endpoint, region, credential and checksum choices are made
// in one place.
package s3client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
)

// DefaultRegion is used when neither the URI nor the environment names one.
const DefaultRegion = "us-east-1"

// Conn is how to reach an S3-compatible store.
type Conn struct {
	// Endpoint is a custom endpoint URL (an embedded or self-hosted server);
	// "" means AWS.
	Endpoint string
	// Region of the bucket; DefaultRegion when empty and the environment
	// names none.
	Region string
	// Anonymous sends unsigned requests (public buckets); otherwise the
	// default AWS credential chain signs them.
	Anonymous bool
	// PathStyle addresses buckets as ENDPOINT/BUCKET/KEY.
	PathStyle bool
	// NoRetries turns the SDK's retryer off, for callers that retry
	// themselves (with their own clock and metrics).
	NoRetries bool

	pathStyleSet bool // SetOption saw pathStyle (ApplyDefaults keeps it)
}

// MaxIdleConnsPerHost is how many idle connections to one endpoint the
// client keeps for reuse. The SDK's default (10) is below what the archive
// source keeps in flight (Parallelism files x 4 range requests, 16 by
// default): every burst past 10 closed the surplus connections and dialled
// new ones, 1,560 of them in one read of the seed archive (20k requests),
// each a TCP handshake, a server goroutine, fresh buffers and stack growth.
const MaxIdleConnsPerHost = 64

// New returns a client for c. Checksums are computed and validated only
// where the API requires them: S3-compatible servers (gofakes3, Versity)
// refuse the SDK's default trailing checksums on some requests. The SDK
// logs nothing (its warnings would bypass ethstream's errors; every failure
// reaches the caller as an error). With a custom endpoint the credential
// chain never asks the EC2 instance-metadata service (169.254.169.254): a
// self-hosted or embedded server is no AWS instance role's business, and
// the lookup is traffic beyond the endpoint the user named; missing
// credentials then fail the first request at once (storage classifies it
// as STORAGE_CREDENTIALS).
func New(ctx context.Context, c Conn) (*s3.Client, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
			t.MaxIdleConns = max(t.MaxIdleConns, MaxIdleConnsPerHost)
		})),
		config.WithLogger(logging.Nop{}),
		config.WithClientLogMode(0),
	}
	if c.Endpoint != "" {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	if c.Anonymous {
		opts = append(opts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if !c.Anonymous && cfg.Credentials != nil {
		cfg.Credentials = credentials{cfg.Credentials}
	}
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		if c.Endpoint != "" {
			so.BaseEndpoint = aws.String(c.Endpoint)
		}
		so.UsePathStyle = c.PathStyle
		if c.NoRetries {
			so.Retryer = aws.NopRetryer{}
		}
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
}

// CredentialsError is the error of a request that found no credentials to
// sign with: the default chain found none, or its source failed. The SDK
// gives this failure no type of its own.
type CredentialsError struct{ Err error }

func (e *CredentialsError) Error() string { return "no S3 credentials: " + e.Err.Error() }
func (e *CredentialsError) Unwrap() error { return e.Err }

// credentials types the failures of the credential chain it wraps.
type credentials struct{ aws.CredentialsProvider }

func (c credentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	v, err := c.CredentialsProvider.Retrieve(ctx)
	if err != nil && ctx.Err() == nil {
		return v, &CredentialsError{Err: err}
	}
	return v, err
}
