package s3archive

import (
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/s3client"
)

// ArchiveFileUnreadable is the code of every error caused by an archive object
// the source cannot read: a truncated or non-Parquet file, a file without the
// required columns, an unreadable bucket or prefix.
const ArchiveFileUnreadable = "ARCHIVE_FILE_UNREADABLE"

// Defaults applied by New when an option is zero.
const (
	// DefaultParallelism is the parallelism of a file:// archive: a local
	// file's reads cost CPU, not waiting, and four workers keep two cores
	// busy.
	DefaultParallelism = 4
	// DefaultS3Parallelism is an s3:// archive's: every file's reads are
	// round trips (a tail, then its column chunks), which more files in
	// flight hide. Through the embedded endpoint on the 2-core reference
	// machine, 8 cut the seed backfill's wait on the source by 40%
	// (getBatch 0.5-0.7 s to 0.3-0.45 s) and 16 did no better; AWS's tens of
	// milliseconds a request may want more (parallelism=).
	DefaultS3Parallelism = 8
	DefaultTimeout       = 30 * time.Second
	DefaultBatchTimeout  = 10 * time.Minute
	DefaultRegion        = s3client.DefaultRegion
	// PublicBucketRegion is the region of s3://aws-public-blockchain.
	PublicBucketRegion = "us-east-2"
)

// Options configure a Source. The zero value of every field but URI and
// Columns is valid.
type Options struct {
	// URI is s3://bucket/prefix or file:///abs/path: the directory holding the
	// date=YYYY-MM-DD partitions (e.g. .../v1.0/eth/blocks).
	URI string
	// Columns are the columns the files hold, the source's schema
	// (Source.Schema) in this order; New refuses none. ParseURI leaves it
	// to the caller: the URI names a location, not a schema.
	Columns []Column
	// Endpoint is a custom S3 endpoint (http://127.0.0.1:9000); empty for AWS.
	Endpoint string
	// Region of the bucket; DefaultRegion when empty and the environment names none.
	Region string
	// Anonymous sends unsigned requests (public buckets); otherwise the
	// default AWS credential chain is used.
	Anonymous bool
	// PathStyle addresses buckets as endpoint/bucket/key. ParseURI sets it
	// when an endpoint is given.
	PathStyle bool
	// MaxFilesPerTrigger caps the number of new files admitted by one
	// LatestOffset call; 0 means no limit.
	MaxFilesPerTrigger int
	// MaxBytesPerTrigger caps the total size of the files admitted by one
	// LatestOffset call (at least one file is always admitted); 0 means no limit.
	MaxBytesPerTrigger int64
	// Parallelism bounds how many files are fetched and decoded at once;
	// DefaultParallelism (file://) or DefaultS3Parallelism (s3://) when 0.
	Parallelism int
	// SkipUnreadable skips files that fail with ARCHIVE_FILE_UNREADABLE
	// instead of failing the batch; skipped files are listed in Metrics().
	SkipUnreadable bool
	// ListPageSize is the MaxKeys of each ListObjectsV2 page; 0 means the
	// server's default (1000). Tests use small pages to exercise pagination.
	ListPageSize int
	// Timeout bounds each store request, its body included
	// (DefaultTimeout when 0); a request that times out is retried.
	Timeout time.Duration
	// BatchTimeout bounds everything one LatestOffset or ReadBatch asks of
	// the store, retries included (DefaultBatchTimeout when 0): a store
	// that accepts connections and never answers fails the batch with
	// ARCHIVE_FILE_UNREADABLE and a remedy after this long.
	BatchTimeout time.Duration
	// Logger receives debug and warning logs; the engine's logger when nil.
	Logger *slog.Logger
	// MovedFrom is the location (s3://BUCKET/PREFIX or file:///ABS/PATH,
	// normalised as URI is) this archive was read from before it moved:
	// the URI option movedFrom. A start whose checkpoint recorded the
	// source at MovedFrom resumes here when every file the source log
	// records exists at the new location with the logged size (CheckMove);
	// the move is then recorded in the source's metadata (move.go), so
	// later starts need no option. Empty: no move.
	MovedFrom string
	// FS reads a file:// archive (listing, sizes, ranged reads); nil means
	// vfs.Default, the local disk. A test passes a fault-injecting FS so
	// its faults reach archive reads too.
	FS vfs.FS
}

// ParseURI parses the URI form of the options (docs/contracts.md, CLI):
//
//	s3://BUCKET/v1.0/eth/blocks?endpoint=http://127.0.0.1:9000&region=us-east-2&anonymous=true&maxFilesPerTrigger=5
//	file:///abs/path/v1.0/eth/blocks?maxFilesPerTrigger=5
//
// Query keys: endpoint, region, anonymous, pathStyle, maxFilesPerTrigger,
// maxBytesPerTrigger, parallelism, skipUnreadable, listPageSize, timeout and
// batchTimeout (Go durations), movedFrom (the archive's old location,
// URL-encoded; see Options.MovedFrom). An unknown key
// or a bad value is an INVALID_ARGUMENT error.
func ParseURI(uri string) (Options, error) {
	var o Options
	u, err := parseLocation(uri)
	if err != nil {
		return o, err
	}
	base := *u
	base.RawQuery = ""
	base.ForceQuery = false
	o.URI = base.String()
	var conn s3client.Conn
	for key, vals := range u.Query() {
		v := vals[len(vals)-1]
		if ok, want := conn.SetOption(key, v); ok {
			if want != "" {
				return o, badOption(key, v, want)
			}
			continue
		}
		if err := o.setOption(uri, key, v); err != nil {
			return o, err
		}
	}
	conn.ApplyDefaults()
	o.Endpoint, o.Region, o.Anonymous, o.PathStyle = conn.Endpoint, conn.Region, conn.Anonymous, conn.PathStyle
	if u.Scheme == "file" && (o.Endpoint != "" || o.Anonymous || o.Region != "") {
		return o, errcode.New(errcode.InvalidArgument, "", uriRemedy, "s3 options given for file uri %q", uri)
	}
	return o, nil
}

// parseLocation parses uri and checks its location: s3://BUCKET/... or
// file:///ABS/PATH.
func parseLocation(uri string) (*url.URL, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, errcode.Wrap(err, errcode.InvalidArgument, "", uriRemedy, "parse s3archive uri %q", uri)
	}
	switch u.Scheme {
	case "s3":
		if u.Host == "" {
			return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "s3archive uri %q names no bucket", uri)
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "file uri %q must be file:///absolute/path", uri)
		}
		if !filepath.IsAbs(u.Path) {
			return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "file uri %q must name an absolute path", uri)
		}
	default:
		return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "s3archive uri %q: scheme must be s3 or file", uri)
	}
	return u, nil
}

// normalLocation is loc as the query shape records a location (the URI
// without its query, as URL.String renders it) without a final "/": the
// form a move compares and a logged path starts with.
func normalLocation(loc string) (string, error) {
	u, err := parseLocation(loc)
	if err != nil {
		return "", err
	}
	u.RawQuery, u.ForceQuery, u.Fragment = "", false, ""
	if u.Scheme == "file" {
		u.Host = ""
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// badOption is the error of option key=v whose value is not what the
// option takes (want), naming that rather than the parser's own text.
func badOption(key, v, want string) error {
	return errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("pass %s=<%s>", key, want), "s3archive option %s=%q: want %s", key, v, want)
}

// setOption sets the source option key (a read limit, the parallelism,
// skipUnreadable, the listing page, a timeout) of uri to v.
func (o *Options) setOption(uri, key, v string) error {
	switch key {
	case "maxFilesPerTrigger", "parallelism", "listPageSize":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badOption(key, v, "a non-negative integer")
		}
		switch key {
		case "maxFilesPerTrigger":
			o.MaxFilesPerTrigger = n
		case "parallelism":
			o.Parallelism = n
		default:
			o.ListPageSize = n
		}
	case "maxBytesPerTrigger":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badOption(key, v, "a non-negative integer")
		}
		o.MaxBytesPerTrigger = n
	case "skipUnreadable":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badOption(key, v, "true or false")
		}
		o.SkipUnreadable = b
	case "timeout", "batchTimeout":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return badOption(key, v, "a positive duration, e.g. 30s")
		}
		if key == "timeout" {
			o.Timeout = d
		} else {
			o.BatchTimeout = d
		}
	case "movedFrom":
		loc, err := normalLocation(v)
		if err != nil {
			return badOption(key, v, "the old location, s3://BUCKET/PREFIX or file:///ABS/PATH")
		}
		o.MovedFrom = loc
	default:
		return errcode.New(errcode.InvalidArgument, "", uriRemedy,
			"unknown s3archive option %q in %q (known: %s)", key, uri, strings.Join(knownOptions, ", "))
	}
	return nil
}

var knownOptions = append(slices.Clone(s3client.ConnOptions), "maxFilesPerTrigger",
	"maxBytesPerTrigger", "parallelism", "skipUnreadable", "listPageSize", "timeout", "batchTimeout", "movedFrom")

const uriRemedy = "use s3://BUCKET/PREFIX?key=value or file:///ABS/PATH?key=value with keys endpoint, region, anonymous, pathStyle, maxFilesPerTrigger, maxBytesPerTrigger, parallelism, skipUnreadable, listPageSize, timeout, batchTimeout, movedFrom"
