package storage

import (
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
)

func TestParseRefusesUnsupportedSchemes(t *testing.T) {
	for _, v := range []string{
		"gs://bucket/q1", "abfss://c@acct.dfs.core.windows.net/q1", "s4://bucket/q1",
		"hdfs://nn/q1", "S3A://bucket/q1", "http://host/q1",
	} {
		_, err := Parse("--checkpoint", v)
		if !errcode.Is(err, CodeUnsupportedLocation) {
			t.Errorf("Parse(%q) = %v, want %s", v, err, CodeUnsupportedLocation)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind Kind
		path string
		o    S3Options
	}{
		{in: "work/ck", path: "work/ck"},
		{in: "./work//ck/", path: "work/ck"},
		{in: "file:///abs/ck", path: "/abs/ck"},
		{in: "weird:name/x", path: "weird:name/x"}, // no "://": a local name
		{in: "file:/abs/ck", path: "/abs/ck"},      // Hadoop's file URI, as Spark writes it
		{in: "./s3:/x", path: "s3:/x"},             // a local directory named s3:, asked for
		{in: "s3x:/y", path: "s3x:/y"},
		{in: "s3://b/q1/checkpoint", kind: S3, path: "s3://b/q1/checkpoint", o: S3Options{Bucket: "b", Prefix: "q1/checkpoint"}},
		{in: "s3://b", kind: S3, path: "s3://b", o: S3Options{Bucket: "b"}},
		{in: "s3://b/q1/?endpoint=http://127.0.0.1:9000&leaseTTL=5s", kind: S3, path: "s3://b/q1",
			o: S3Options{Bucket: "b", Prefix: "q1", Endpoint: "http://127.0.0.1:9000", PathStyle: true, LeaseTTL: 5 * time.Second}},
		{in: "s3://b/t?region=eu-west-1&anonymous=true&pathStyle=false&endpoint=https://s3.example", kind: S3, path: "s3://b/t",
			o: S3Options{Bucket: "b", Prefix: "t", Region: "eu-west-1", Anonymous: true, Endpoint: "https://s3.example"}},
	} {
		l, err := Parse("--table", tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if l.Kind != tc.kind || l.Path != tc.path || l.S3 != tc.o {
			t.Errorf("Parse(%q) = %+v, want kind %d path %q %+v", tc.in, l, tc.kind, tc.path, tc.o)
		}
	}
}

func TestParseRefusesBadS3Options(t *testing.T) {
	for in, code := range map[string]string{
		"s3:///q1":                     CodeUnsupportedLocation,
		"s3://b/q1?endpont=http://x":   errcode.InvalidArgument,
		"s3://b/q1?anonymous=maybe":    errcode.InvalidArgument,
		"s3://b/q1?endpoint=127.0.0.1": errcode.InvalidArgument,
		"s3://b/q1?leaseTTL=10ms":      errcode.InvalidArgument,
		"file://host/x":                CodeUnsupportedLocation,
		"file:///x?endpoint=http://y":  CodeUnsupportedLocation,
	} {
		if _, err := Parse("--checkpoint", in); !errcode.Is(err, code) {
			t.Errorf("Parse(%q) = %v, want %s", in, err, code)
		}
	}
}

// TestParseRefusesLookalikes: a value one slash or one colon short of a
// storage URI is refused by every location flag, never taken for a local
// directory named "s3:" (issue 28: --checkpoint s3:/lake/q once exited 0
// having created ./s3:/lake/q).
func TestParseRefusesLookalikes(t *testing.T) {
	for _, v := range []string{"s3:/lake/q", "s3:lake/q", "S3//lake/q", "s3//lake/q", "S3:/lake", "s3a:/b/x", "gs:/b/x",
		"file:x", "file:relative/ck", "hdfs:/nn/x", "https:/host/x"} {
		_, err := Parse("--checkpoint", v)
		if !errcode.Is(err, errcode.InvalidArgument) {
			t.Errorf("Parse(%q) = %v, want %s", v, err, errcode.InvalidArgument)
			continue
		}
		if e := err.(*errcode.Error); !strings.Contains(e.Msg, "looks like a") || !strings.Contains(e.Remedy, "://") {
			t.Errorf("Parse(%q): %v", v, err)
		}
		if err := CheckLocal("--local-dir", v); !errcode.Is(err, errcode.InvalidArgument) {
			t.Errorf("CheckLocal(%q) = %v, want %s", v, err, errcode.InvalidArgument)
		}
	}
}

func TestCheckLocal(t *testing.T) {
	for _, v := range []string{"", "cache", "/tmp/x", "file:///tmp/x", "file:/tmp/x", "a:b"} {
		if err := CheckLocal("--local-dir", v); err != nil {
			t.Errorf("CheckLocal(%q): %v", v, err)
		}
	}
	for _, v := range []string{"s3://b/cache", "gs://b/x", "abfss://c@a/x"} {
		if err := CheckLocal("--local-dir", v); !errcode.Is(err, CodeUnsupportedLocation) {
			t.Errorf("CheckLocal(%q) = %v, want %s", v, err, CodeUnsupportedLocation)
		}
	}
}

func TestS3Paths(t *testing.T) {
	if got := s3PathJoin("s3://b/q1", "offsets", "7"); got != "s3://b/q1/offsets/7" {
		t.Errorf("join = %q", got)
	}
	if got := s3PathJoin("s3://b", "x"); got != "s3://b/x" {
		t.Errorf("join = %q", got)
	}
	if got := s3PathDir("s3://b/q1/offsets/7"); got != "s3://b/q1/offsets" {
		t.Errorf("dir = %q", got)
	}
	if got := s3PathDir("s3://b"); got != "s3://b" {
		t.Errorf("dir = %q", got)
	}
	if got := s3PathBase("s3://b/q1/offsets/7"); got != "7" {
		t.Errorf("base = %q", got)
	}
}

// TestParseRefusesTilde: a quoted ~ reaches the program unexpanded; taken as
// a path it made a directory named ~ in the working directory.
func TestParseRefusesTilde(t *testing.T) {
	for v, remedy := range map[string]string{
		"~/ck":   "write $HOME/ck (the shell expands ~ only unquoted), or ./~/ck for a directory named ~",
		"~":      "write $HOME (the shell expands ~ only unquoted), or ./~ for a directory named ~",
		"~/a/b/": "write $HOME/a/b (the shell expands ~ only unquoted), or ./~/a/b/ for a directory named ~",
	} {
		_, err := Parse("--checkpoint", v)
		if !errcode.Is(err, errcode.InvalidArgument) || err.(*errcode.Error).Remedy != remedy {
			t.Errorf("Parse(%q) = %v, want %s: ...: %s", v, err, errcode.InvalidArgument, remedy)
		}
		if err := CheckLocal("--local-dir", v); !errcode.Is(err, errcode.InvalidArgument) {
			t.Errorf("CheckLocal(%q) = %v", v, err)
		}
	}
	// ./~ is a directory named ~, and ~user is not expanded by us either way.
	for _, v := range []string{"./~/ck", "a/~/b", "~user/x"} {
		if _, err := Parse("--checkpoint", v); err != nil {
			t.Errorf("Parse(%q): %v", v, err)
		}
	}
}
