package deltasource

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

// DefaultMaxFilesPerTrigger is Delta's maxFilesPerTrigger default.
const DefaultMaxFilesPerTrigger = 1000

// Options configure a Source; the zero value of every field but URI is
// Delta's default.
type Options struct {
	// URI is the table: file:///ABS/PATH or s3://BUCKET/PREFIX.
	URI string
	// Conn is an s3:// table's connection; ConnQuery the same options as
	// the URI gave them (for storage.Parse).
	Conn      s3client.Conn
	ConnQuery url.Values
	// MaxFilesPerTrigger caps the files a batch admits
	// (DefaultMaxFilesPerTrigger when 0); MaxBytesPerTrigger is a soft cap
	// on their size (the file that crosses it is admitted).
	MaxFilesPerTrigger int
	MaxBytesPerTrigger int64
	// StartingVersion skips the initial snapshot and reads the commits
	// from this version on: a version number, or "latest" (the commits
	// after the latest version at the first start); "": not set.
	// StartingTimestamp likewise from the first commit at or after it.
	// Both apply only to a first start.
	StartingVersion   string
	StartingTimestamp time.Time
	// IgnoreDeletes skips commits that only remove data; IgnoreChanges
	// also re-emits the files rewritten by updates (duplicates);
	// SkipChangeCommits skips every commit that removes data.
	IgnoreDeletes, IgnoreChanges, SkipChangeCommits bool
	// Parallelism bounds how many data files are decoded at once (4).
	Parallelism int
	// Logger receives the source's logs.
	Logger *slog.Logger
	// FS reads a file:// table; nil: the local disk.
	FS vfs.FS
}

const uriRemedy = "use delta:file:///ABS/PATH?key=value or delta:s3://BUCKET/PREFIX?key=value with keys maxFilesPerTrigger, maxBytesPerTrigger, startingVersion, startingTimestamp, ignoreDeletes, ignoreChanges, skipChangeCommits, parallelism, endpoint, region, anonymous, pathStyle"

var knownOptions = []string{"maxFilesPerTrigger", "maxBytesPerTrigger", "startingVersion", "startingTimestamp",
	"ignoreDeletes", "ignoreChanges", "skipChangeCommits", "parallelism"}

func badOption(key, v, want string) error {
	return errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("pass %s=<%s>", key, want), "delta source option %s=%q: want %s", key, v, want)
}

// ParseURI parses delta:URI's URI: the table location and Delta's source
// options (case-insensitive names, as Spark's).
func ParseURI(uri string) (Options, error) {
	var o Options
	u, err := url.Parse(uri)
	if err != nil {
		return o, errcode.Wrap(err, errcode.InvalidArgument, "", uriRemedy, "parse delta source uri %q", uri)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" || !filepath.IsAbs(filepath.FromSlash(u.Path)) {
			return o, errcode.New(errcode.InvalidArgument, "", uriRemedy, "file uri %q must be file:///absolute/path", uri)
		}
	case "s3":
		if u.Host == "" {
			return o, errcode.New(errcode.InvalidArgument, "", uriRemedy, "s3 uri %q names no bucket", uri)
		}
	default:
		return o, errcode.New(errcode.InvalidArgument, "", uriRemedy, "delta source uri %q: scheme must be file or s3", uri)
	}
	base := *u
	base.RawQuery, base.ForceQuery, base.Fragment = "", false, ""
	if base.Scheme == "file" {
		base.Host = ""
	}
	o.URI = strings.TrimSuffix(base.String(), "/")
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return o, errcode.Wrap(err, errcode.InvalidArgument, "", uriRemedy, "parse the options of delta source uri %q", uri)
	}
	for key, vals := range query {
		v := vals[len(vals)-1]
		if ok, want := o.Conn.SetOption(key, v); ok {
			if want != "" {
				return o, badOption(key, v, want)
			}
			if o.ConnQuery == nil {
				o.ConnQuery = url.Values{}
			}
			o.ConnQuery.Set(key, v)
			continue
		}
		canon := ""
		for _, k := range knownOptions {
			if strings.EqualFold(k, key) {
				canon = k
			}
		}
		if err := o.set(canon, key, v); err != nil {
			return o, err
		}
	}
	o.Conn.ApplyDefaults()
	if u.Scheme == "file" && (o.Conn.Endpoint != "" || o.Conn.Anonymous || o.Conn.Region != "") {
		return o, errcode.New(errcode.InvalidArgument, "", uriRemedy, "s3 options given for file uri %q", uri)
	}
	if o.StartingVersion != "" && !o.StartingTimestamp.IsZero() {
		return o, errcode.New(errcode.InvalidArgument, "", "pass one of startingVersion and startingTimestamp",
			"delta source options startingVersion and startingTimestamp are mutually exclusive")
	}
	return o, nil
}

func (o *Options) set(canon, key, v string) error {
	boolOpt := func(dst *bool) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badOption(key, v, "true or false")
		}
		*dst = b
		return nil
	}
	switch canon {
	case "maxFilesPerTrigger", "parallelism":
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return badOption(key, v, "a positive integer")
		}
		if canon == "parallelism" {
			o.Parallelism = n
		} else {
			o.MaxFilesPerTrigger = n
		}
	case "maxBytesPerTrigger":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return badOption(key, v, "a positive number of bytes")
		}
		o.MaxBytesPerTrigger = n
	case "startingVersion":
		if strings.EqualFold(v, "latest") {
			o.StartingVersion = "latest"
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badOption(key, v, "a version number or latest")
		}
		o.StartingVersion = strconv.FormatInt(n, 10)
	case "startingTimestamp":
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02"} {
			if t, err := time.Parse(layout, v); err == nil {
				o.StartingTimestamp = t
				return nil
			}
		}
		return badOption(key, v, "a timestamp such as 2026-01-02 or 2026-01-02T03:04:05Z")
	case "ignoreDeletes":
		return boolOpt(&o.IgnoreDeletes)
	case "ignoreChanges":
		return boolOpt(&o.IgnoreChanges)
	case "skipChangeCommits":
		return boolOpt(&o.SkipChangeCommits)
	default:
		return errcode.New(errcode.InvalidArgument, "", uriRemedy, "unknown delta source option %q (known: %s)",
			key, strings.Join(append(slices.Clone(s3client.ConnOptions), knownOptions...), ", "))
	}
	return nil
}
