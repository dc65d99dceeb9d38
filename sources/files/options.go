package files

import (
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/s3client"
	"github.com/ethstream/ethstream/sources/ddl"
)

// Formats this package reads.
const (
	Parquet = "parquet"
	JSON    = "json"
	CSV     = "csv"
)

// Parse modes (Spark's ParseMode).
const (
	Permissive    = "PERMISSIVE"
	DropMalformed = "DROPMALFORMED"
	FailFast      = "FAILFAST"
)

// DefaultCorruptColumn is Spark's spark.sql.columnNameOfCorruptRecord.
const DefaultCorruptColumn = "_corrupt_record"

// Options configure a Source. The zero value of every field but Format and
// URI is Spark's default.
type Options struct {
	// Format is parquet, json or csv.
	Format string
	// URI is the directory: file:///ABS/PATH or s3://BUCKET/PREFIX.
	URI string
	// Conn is an s3:// location's connection (endpoint, region,
	// anonymous, pathStyle).
	Conn s3client.Conn
	// Schema is the schema= option in Spark's DDL form; nil: none given.
	Schema *ddl.Schema
	// SchemaInference is spark.sql.streaming.schemaInference: without a
	// schema, infer one from the files present at the start; false (Spark's
	// default): a start without a schema is refused.
	SchemaInference bool
	// MaxFilesPerTrigger, MaxBytesPerTrigger, LatestFirst and MaxFileAge
	// are Spark's read limits (filelog.Limits). Spark's maxFilesPerTrigger
	// has no default either; its maxFileAge defaults to 7 days, this
	// source's to none (docs/contracts.md).
	MaxFilesPerTrigger int
	MaxBytesPerTrigger int64
	LatestFirst        bool
	MaxFileAge         time.Duration
	// PathGlobFilter keeps files whose name (not path) matches the glob.
	PathGlobFilter string
	// RecursiveFileLookup reads every file under the directory and turns
	// partition discovery off.
	RecursiveFileLookup bool

	// Mode is PERMISSIVE, DROPMALFORMED or FAILFAST (csv, json).
	Mode string
	// CorruptColumn is columnNameOfCorruptRecord: in PERMISSIVE mode a
	// malformed record's text goes to this column when the schema has it
	// (a nullable STRING).
	CorruptColumn string
	// TimestampFormat is Spark's timestampFormat (a DateTimeFormatter
	// pattern); empty: Spark's default parsing (ISO 8601 and the SQL
	// form, a zone optional, UTC when absent).
	TimestampFormat string
	// DateFormat is accepted and checked (DATE columns wait for a date
	// type in the engine).
	DateFormat string

	// CSV: Header (first line of each file is a header, skipped; Spark's
	// enforceSchema=true: the schema's column order rules), Sep, Quote,
	// Escape and NullValue (Spark's defaults ",", "\"", "\\", "").
	Header    bool
	Sep       byte
	Quote     byte
	Escape    byte
	NullValue string
	// InferCSVTypes is the csv option inferSchema: with schema inference,
	// infer column types (otherwise every column is a string, as Spark).
	InferCSVTypes bool

	// Parallelism bounds how many files are read and decoded at once
	// (default 4).
	Parallelism int
	// Logger receives the source's logs; the engine's when nil.
	Logger *slog.Logger
	// FS reads a file:// location; nil: the local disk.
	FS vfs.FS
}

const uriRemedy = "use FORMAT:file:///ABS/PATH?key=value or FORMAT:s3://BUCKET/PREFIX?key=value (docs/contracts.md, Configuration)"

func badOption(format, key, v, want string) error {
	return errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("pass %s=<%s>", key, want), "%s source option %s=%q: want %s", format, key, v, want)
}

var commonOptions = []string{"schema", "maxFilesPerTrigger", "maxBytesPerTrigger", "latestFirst", "maxFileAge",
	"pathGlobFilter", "recursiveFileLookup", "parallelism"}

var formatOptions = map[string][]string{
	Parquet: nil,
	JSON:    {"mode", "columnNameOfCorruptRecord", "timestampFormat", "dateFormat", "multiLine"},
	CSV: {"mode", "columnNameOfCorruptRecord", "timestampFormat", "dateFormat", "header", "sep", "delimiter", "quote",
		"escape", "nullValue", "inferSchema"},
}

// ParseURI parses the URI form of format's options:
//
//	file:///data/orders?schema=order_id%20STRING,amount%20DOUBLE&maxFilesPerTrigger=10
//	s3://lake/orders?endpoint=http://127.0.0.1:9000&header=true&schema=...
//
// Option names are Spark's, case-insensitive as Spark's are. An unknown
// key or a bad value is INVALID_ARGUMENT; a schema that does not parse is
// the DDL parser's error.
func ParseURI(format, uri string) (Options, error) {
	o := Options{Format: format, Mode: Permissive, CorruptColumn: DefaultCorruptColumn, Sep: ',', Quote: '"', Escape: '\\'}
	known, ok := formatOptions[format]
	if !ok {
		return o, errcode.New(errcode.InvalidArgument, "", "use parquet, json or csv", "unknown file format %q", format)
	}
	known = append(slices.Clone(commonOptions), known...)
	u, err := url.Parse(uri)
	if err != nil {
		return o, errcode.Wrap(err, errcode.InvalidArgument, "", uriRemedy, "parse %s source uri %q", format, uri)
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
		return o, errcode.New(errcode.InvalidArgument, "", uriRemedy, "%s source uri %q: scheme must be file or s3", format, uri)
	}
	base := *u
	base.RawQuery, base.ForceQuery, base.Fragment = "", false, ""
	if base.Scheme == "file" {
		base.Host = ""
	}
	o.URI = strings.TrimSuffix(base.String(), "/")
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return o, errcode.Wrap(err, errcode.InvalidArgument, "", "URL-encode option values: ; as %3B, & as %26, space as %20",
			"parse the options of %s source uri %q", format, uri)
	}
	for key, vals := range query {
		v := vals[len(vals)-1]
		if ok, want := o.Conn.SetOption(key, v); ok {
			if want != "" {
				return o, badOption(format, key, v, want)
			}
			continue
		}
		canon := ""
		for _, k := range known {
			if strings.EqualFold(k, key) {
				canon = k
			}
		}
		if canon == "" {
			return o, errcode.New(errcode.InvalidArgument, "", uriRemedy, "unknown %s source option %q (known: %s)",
				format, key, strings.Join(append(slices.Clone(s3client.ConnOptions), known...), ", "))
		}
		if err := o.set(canon, v); err != nil {
			return o, err
		}
	}
	o.Conn.ApplyDefaults()
	if u.Scheme == "file" && (o.Conn.Endpoint != "" || o.Conn.Anonymous || o.Conn.Region != "") {
		return o, errcode.New(errcode.InvalidArgument, "", uriRemedy, "s3 options given for file uri %q", uri)
	}
	return o, nil
}

func (o *Options) set(key, v string) error {
	f := o.Format
	boolOpt := func(dst *bool) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badOption(f, key, v, "true or false")
		}
		*dst = b
		return nil
	}
	charOpt := func(dst *byte, allowEmpty bool) error {
		switch {
		case v == "" && allowEmpty:
			*dst = 0
		case len(v) == 1 && v[0] < utf8.RuneSelf && v[0] != '\n' && v[0] != '\r':
			*dst = v[0]
		case v == `\t`:
			*dst = '\t'
		default:
			return badOption(f, key, v, "one ASCII character")
		}
		return nil
	}
	switch key {
	case "schema":
		s, err := ddl.Parse(v)
		if err != nil {
			return err
		}
		o.Schema = &s
	case "maxFilesPerTrigger", "parallelism":
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return badOption(f, key, v, "a positive integer")
		}
		if key == "parallelism" {
			o.Parallelism = n
		} else {
			o.MaxFilesPerTrigger = n
		}
	case "maxBytesPerTrigger":
		n, err := parseBytes(v)
		if err != nil || n <= 0 {
			return badOption(f, key, v, "a positive size, e.g. 10m or 1048576")
		}
		o.MaxBytesPerTrigger = n
	case "maxFileAge":
		d, err := parseTimeString(v)
		if err != nil {
			return badOption(f, key, v, "a duration such as 7d, 12h or 30m")
		}
		o.MaxFileAge = d
	case "latestFirst":
		return boolOpt(&o.LatestFirst)
	case "recursiveFileLookup":
		return boolOpt(&o.RecursiveFileLookup)
	case "pathGlobFilter":
		if _, err := path.Match(v, ""); err != nil {
			return badOption(f, key, v, "a glob such as *.csv")
		}
		o.PathGlobFilter = v
	case "mode":
		m := strings.ToUpper(v)
		if m != Permissive && m != DropMalformed && m != FailFast {
			return badOption(f, key, v, "PERMISSIVE, DROPMALFORMED or FAILFAST")
		}
		o.Mode = m
	case "columnNameOfCorruptRecord":
		if v == "" {
			return badOption(f, key, v, "a column name")
		}
		o.CorruptColumn = v
	case "timestampFormat", "dateFormat":
		if _, err := compilePattern(v); err != nil {
			return badOption(f, key, v, "a datetime pattern such as yyyy-MM-dd HH:mm:ss ("+err.Error()+")")
		}
		if key == "dateFormat" {
			o.DateFormat = v
		} else {
			o.TimestampFormat = v
		}
	case "multiLine":
		var b bool
		if err := boolOpt(&b); err != nil {
			return err
		}
		if b {
			return errcode.New(errcode.InvalidArgument, "", "write JSON lines (one object per line) and drop multiLine=true",
				"the json source reads JSON lines only: multiLine=true is not supported")
		}
	case "header":
		return boolOpt(&o.Header)
	case "inferSchema":
		return boolOpt(&o.InferCSVTypes)
	case "sep", "delimiter":
		return charOpt(&o.Sep, false)
	case "quote":
		return charOpt(&o.Quote, true)
	case "escape":
		return charOpt(&o.Escape, true)
	case "nullValue":
		o.NullValue = v
	}
	return nil
}

// parseTimeString is Spark's JavaUtils.timeStringAsMs: a number with an
// optional unit (us, ms, s, m, min, h, d; ms without one).
func parseTimeString(v string) (time.Duration, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return 0, fmt.Errorf("bad time string %q", v)
	}
	units := map[string]time.Duration{"": time.Millisecond, "us": time.Microsecond, "ms": time.Millisecond, "s": time.Second,
		"m": time.Minute, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	u, ok := units[strings.TrimSpace(s[i:])]
	if !ok {
		return 0, fmt.Errorf("bad time unit in %q", v)
	}
	return time.Duration(n) * u, nil
}

// parseBytes is Spark's byteStringAsBytes: a number with an optional unit
// (b, k|kb, m|mb, g|gb, t|tb; bytes without one).
func parseBytes(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, err
	}
	shift := map[string]uint{"": 0, "b": 0, "k": 10, "kb": 10, "m": 20, "mb": 20, "g": 30, "gb": 30, "t": 40, "tb": 40}
	sh, ok := shift[s[i:]]
	if !ok || n > (1<<62)>>sh {
		return 0, fmt.Errorf("bad size %q", v)
	}
	return n << sh, nil
}
