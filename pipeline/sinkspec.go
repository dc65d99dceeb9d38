package pipeline

import (
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/files"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/stream"
)

// SinkParquet is the --sink format of Spark's file sink (package
// sink/files): `writeStream.format("parquet").option("path", ...)`.
const SinkParquet = "parquet"

// SinkSpec is a parsed --sink FORMAT:LOCATION.
type SinkSpec struct {
	Format string
	// Path is the output directory: absolute on the local disk, or
	// s3://bucket/prefix (without the query) on S3.
	Path string
	// Location is the parsed location, with an S3 location's options.
	Location storage.Location
}

// ParseSinkSpec reads --sink FORMAT:LOCATION. The only format besides the
// Delta table of --table is parquet, on the local disk (a path or
// file:///abs/path) or S3 (s3://bucket/prefix?OPTIONS, the options of every
// s3:// location: endpoint, region, anonymous, pathStyle).
func ParseSinkSpec(s string) (SinkSpec, error) {
	const remedy = "pass --sink parquet:file:///ABS/DIR or parquet:s3://BUCKET/PREFIX (Spark's file sink), or --table DIR for a Delta table"
	format, loc, ok := strings.Cut(s, ":")
	if !ok || loc == "" {
		return SinkSpec{}, errcode.New(errcode.InvalidArgument, "", remedy, "--sink %q is not FORMAT:LOCATION", s)
	}
	if format != SinkParquet {
		return SinkSpec{}, errcode.New(errcode.InvalidArgument, "", remedy, "--sink format %q: FORMAT is parquet", format)
	}
	l, err := storage.Parse("--sink", loc)
	if err != nil {
		return SinkSpec{}, err
	}
	if l.Kind == storage.S3 {
		if strings.Trim(strings.TrimPrefix(l.Path, "s3://"+l.S3.Bucket), "/") == "" {
			return SinkSpec{}, errcode.New(errcode.InvalidArgument, "", remedy,
				"--sink %q: give a prefix under the bucket, the directory the part files and _spark_metadata go to", s)
		}
		return SinkSpec{Format: format, Path: l.Path, Location: l}, nil
	}
	if l.Kind != storage.Local {
		return SinkSpec{}, errcode.New(errcode.InvalidArgument, "", remedy,
			"--sink %q: the parquet sink writes to the local disk or S3", s)
	}
	p, err := filepath.Abs(l.Path)
	if err != nil {
		return SinkSpec{}, errcode.Wrap(err, errcode.InvalidArgument, "", remedy, "--sink %q", s)
	}
	l.Path = p
	return SinkSpec{Format: format, Path: p, Location: l}, nil
}

// logURI is the output directory as the sink's log names it: Hadoop's
// Path.toUri, "file:/out" for the local /out; an S3 prefix as given,
// s3://bucket/prefix.
func (s SinkSpec) logURI() string {
	if s.Location.Kind == storage.S3 {
		return s.Path
	}
	return "file:" + filepath.ToSlash(s.Path)
}

// newFileSink builds the file sink of spec for a query of output mode mode
// (Spark's names), refusing every mode but append as Spark does. fs is the
// run's FS (nil: the local disk), which routes an s3:// path to its bucket
// (Locations).
func newFileSink(spec SinkSpec, mode string, fs vfs.FS, conf map[string]string) (stream.Sink, error) {
	if err := files.CheckOutputMode(mode); err != nil {
		return nil, err
	}
	if fs == nil {
		fs = vfs.Default
	}
	interval, err := compactInterval(conf)
	if err != nil {
		return nil, err
	}
	return &files.Sink{FS: fs, Dir: spec.Path, URI: spec.logURI(), CompactInterval: interval}, nil
}

func compactInterval(conf map[string]string) (int, error) {
	v, ok := conf[files.ConfCompactInterval]
	if !ok {
		return 0, nil
	}
	n := 0
	for _, r := range v {
		if r < '0' || r > '9' || n > 1<<20 {
			n = -1
			break
		}
		n = n*10 + int(r-'0')
	}
	if n <= 0 {
		return 0, errcode.New(errcode.InvalidArgument, "", "set it to a positive number of batches",
			"%s=%q is not a positive integer", files.ConfCompactInterval, v)
	}
	return n, nil
}
