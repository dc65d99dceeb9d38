package storage

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/s3client"
)

// CodeUnsupportedLocation is the code of a location whose scheme ethstream
// cannot store to (gs://, abfss://, a typo such as s4://), or an s3://
// location given to a flag that only takes a local path.
const CodeUnsupportedLocation = "UNSUPPORTED_LOCATION"

// Kind says where a location's files live.
type Kind uint8

const (
	// Local is a path on the local disk (a plain path or file:///abs/path).
	Local Kind = iota
	// S3 is an object-store prefix, s3://bucket/prefix.
	S3
)

// Location is a parsed path flag.
type Location struct {
	// Raw is the flag value as given.
	Raw  string
	Kind Kind
	// Path is the path the store's FS understands: a cleaned local path, or
	// s3://bucket/prefix without the query (no trailing slash).
	Path string
	// S3 holds the options of an s3:// location.
	S3 S3Options
}

// S3Options are the query keys of an s3:// location, the same as the
// s3archive source's: endpoint, region, anonymous, pathStyle; plus leaseTTL
// for a checkpoint's lease (doc.go).
type S3Options struct {
	Bucket    string
	Prefix    string // key prefix without leading or trailing slash; "" = bucket root
	Endpoint  string
	Region    string
	Anonymous bool
	PathStyle bool
	LeaseTTL  time.Duration
}

const locationRemedy = "pass a local path, file:///ABS/PATH, or s3://BUCKET/PREFIX?endpoint=URL&region=R&anonymous=BOOL&pathStyle=BOOL&leaseTTL=DUR"

// HasScheme reports whether s starts with "scheme://" (letters, digits, +, -
// or . after a leading letter), which a local path never does by accident.
func HasScheme(s string) (scheme string, ok bool) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return "", false
	}
	for j, c := range s[:i] {
		letter := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (j == 0 || !((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')) {
			return "", false
		}
	}
	return strings.ToLower(s[:i]), true
}

// lookalikeSchemes are the schemes a location names by mistake when it is
// one slash or one colon short of a URI (s3:/x, s3:x, S3//x): such a value
// is refused, not taken for a local directory named "s3:". A local name
// that merely contains a colon (a:b) stays a local path.
var lookalikeSchemes = map[string]bool{"s3": true, "s3a": true, "s3n": true, "gs": true, "file": true, "hdfs": true,
	"abfs": true, "abfss": true, "wasb": true, "wasbs": true, "http": true, "https": true}

// checkLookalike refuses value if it starts like a URI of a storage scheme
// but is not one. file:/ABS (Hadoop's spelling, which Spark writes into its
// checkpoints) is a URI: the local path /ABS.
func checkLookalike(flag, value string) error {
	if _, ok := HasScheme(value); ok {
		return nil
	}
	if value == "~" || strings.HasPrefix(value, "~/") {
		// Quoted, the shell left ~ alone: taken literally it would create a
		// directory named ~ in the working directory.
		home, rest := "$HOME", strings.TrimPrefix(strings.TrimPrefix(value, "~"), "/")
		return errcode.New(errcode.InvalidArgument, "",
			fmt.Sprintf("write %s (the shell expands ~ only unquoted), or ./%s for a directory named ~", path.Join(home, rest), value),
			"%s %q starts with ~, which was not expanded to the home directory", flag, value)
	}
	var scheme string
	if i := strings.IndexByte(value, ':'); i > 0 && lookalikeSchemes[strings.ToLower(value[:i])] {
		scheme = strings.ToLower(value[:i])
		if scheme == "file" && strings.HasPrefix(value[i+1:], "/") {
			return nil
		}
	} else if i := strings.Index(value, "//"); i > 0 && lookalikeSchemes[strings.ToLower(value[:i])] {
		scheme = strings.ToLower(value[:i])
	} else {
		return nil
	}
	return errcode.New(errcode.InvalidArgument, "",
		fmt.Sprintf("write %s:// (a colon and two slashes), e.g. %s, or ./%s for a local path of that name", scheme, lookalikeExample[scheme], value),
		"%s %q looks like a %s:// location but is not one", flag, value, scheme)
}

var lookalikeExample = map[string]string{"s3": "s3://BUCKET/PREFIX", "file": "file:///ABS/PATH"}

func init() {
	for s := range lookalikeSchemes {
		if lookalikeExample[s] == "" {
			lookalikeExample[s] = s + "://HOST/PATH"
		}
	}
}

// localPath is the local path of a value that is not a URI: itself cleaned,
// or /ABS for file:/ABS.
func localPath(value string) string {
	if len(value) > 6 && strings.EqualFold(value[:6], "file:/") {
		value = value[5:]
	}
	if value == "" {
		return ""
	}
	return filepath.Clean(value)
}

// CheckLocal refuses a value of a flag that takes only a local path (the
// state cache, a progress file, a work directory) if it carries any scheme
// but file://. It touches nothing; an empty value is accepted (the flag's
// default applies).
func CheckLocal(flag, value string) error {
	if value == "" {
		return nil
	}
	if err := checkLookalike(flag, value); err != nil {
		return err
	}
	scheme, ok := HasScheme(value)
	if !ok || scheme == "file" {
		return nil
	}
	return errcode.New(CodeUnsupportedLocation, "", "pass a local path (this flag is always on the local disk)",
		"%s %q: %s:// is not supported here", flag, value, scheme)
}

// Parse parses the value of a flag that may name object storage (--checkpoint,
// --table): a local path, file:///abs/path (or file:/abs/path) or
// s3://bucket/prefix?options. Any other scheme is UNSUPPORTED_LOCATION; a
// value one slash or colon short of a URI (s3:/x, s3:x, S3//x) is
// INVALID_ARGUMENT. It is the one location parser of every command that
// takes a checkpoint or a table; it touches nothing.
func Parse(flag, value string) (Location, error) {
	loc := Location{Raw: value}
	if err := checkLookalike(flag, value); err != nil {
		return loc, err
	}
	scheme, ok := HasScheme(value)
	if !ok {
		loc.Path = localPath(value)
		return loc, nil
	}
	u, err := url.Parse(value)
	if err != nil {
		return loc, errcode.Wrap(err, CodeUnsupportedLocation, "", locationRemedy, "%s %q: not a valid URI", flag, value)
	}
	switch scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return loc, errcode.New(CodeUnsupportedLocation, "", locationRemedy, "%s %q: a file URI is file:///absolute/path", flag, value)
		}
		if u.RawQuery != "" {
			return loc, errcode.New(CodeUnsupportedLocation, "", locationRemedy, "%s %q: a file URI takes no options", flag, value)
		}
		loc.Path = filepath.Clean(u.Path)
		return loc, nil
	case "s3":
	default:
		return loc, errcode.New(CodeUnsupportedLocation, "", locationRemedy,
			"%s %q: %s:// is not a supported storage scheme (supported: local paths, file://, s3://)", flag, value, scheme)
	}
	if u.Host == "" {
		return loc, errcode.New(CodeUnsupportedLocation, "", locationRemedy, "%s %q names no bucket", flag, value)
	}
	o := S3Options{Bucket: u.Host, Prefix: strings.Trim(path.Clean("/"+u.Path), "/")}
	var conn s3client.Conn
	for key, vals := range u.Query() {
		v := vals[len(vals)-1]
		bad := func(what string) error {
			return errcode.New(errcode.InvalidArgument, "", locationRemedy, "%s %q: option %s=%q: %s", flag, value, key, v, what)
		}
		if ok, want := conn.SetOption(key, v); ok {
			if want != "" {
				return loc, bad("want " + want)
			}
			continue
		}
		switch key {
		case "leaseTTL":
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second {
				return loc, bad("want a duration of at least 1s, e.g. 30s")
			}
			o.LeaseTTL = d
		default:
			return loc, errcode.New(errcode.InvalidArgument, "", locationRemedy,
				"%s %q: unknown option %q (known: %s, leaseTTL)", flag, value, key, strings.Join(s3client.ConnOptions, ", "))
		}
	}
	conn.ApplyDefaults()
	o.Endpoint, o.Region, o.Anonymous, o.PathStyle = conn.Endpoint, conn.Region, conn.Anonymous, conn.PathStyle
	loc.Kind, loc.S3 = S3, o
	loc.Path = o.root()
	return loc, nil
}

// root is the FS path of the location: s3://bucket or s3://bucket/prefix.
func (o S3Options) root() string {
	if o.Prefix == "" {
		return "s3://" + o.Bucket
	}
	return "s3://" + o.Bucket + "/" + o.Prefix
}

// String renders the location for messages: its path (never credentials;
// the options hold none).
func (l Location) String() string { return l.Path }

// sameEndpoint reports whether two S3 locations use one client.
func (o S3Options) sameEndpoint(p S3Options) bool {
	return o.Bucket == p.Bucket && o.Endpoint == p.Endpoint && o.Region == p.Region &&
		o.Anonymous == p.Anonymous && o.PathStyle == p.PathStyle
}
