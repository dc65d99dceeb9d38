package s3archive

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

func TestParseURI(t *testing.T) {
	cases := []struct {
		uri  string
		want Options
		err  string
	}{
		{uri: "s3://BUCKET/v1.0/eth/blocks?endpoint=http://127.0.0.1:9000&region=us-east-2&anonymous=true&maxFilesPerTrigger=5",
			want: Options{URI: "s3://BUCKET/v1.0/eth/blocks", Endpoint: "http://127.0.0.1:9000", Region: "us-east-2",
				Anonymous: true, PathStyle: true, MaxFilesPerTrigger: 5}},
		{uri: "file:///abs/path/v1.0/eth/blocks?maxFilesPerTrigger=5",
			want: Options{URI: "file:///abs/path/v1.0/eth/blocks", MaxFilesPerTrigger: 5}},
		{uri: "s3://aws-public-blockchain/v1.0/eth/blocks/?region=us-east-2&anonymous=true",
			want: Options{URI: "s3://aws-public-blockchain/v1.0/eth/blocks/", Region: "us-east-2", Anonymous: true}},
		{uri: "s3://b/p?endpoint=http://h:1&pathStyle=false&parallelism=4&skipUnreadable=true&maxBytesPerTrigger=1000&listPageSize=7",
			want: Options{URI: "s3://b/p", Endpoint: "http://h:1", Parallelism: 4, SkipUnreadable: true, MaxBytesPerTrigger: 1000, ListPageSize: 7}},
		{uri: "s3://b/p?maxFilesPerTriger=5", err: "unknown s3archive option"},
		{uri: "s3://b/p?maxFilesPerTrigger=-1", err: "maxFilesPerTrigger"},
		{uri: "s3://b/p?anonymous=maybe", err: "anonymous"},
		{uri: "s3:///p", err: "names no bucket"},
		{uri: "file://host/p", err: "file:///absolute/path"},
		{uri: "file:///p?region=x", err: "s3 options given for file uri"},
		{uri: "http://b/p", err: "scheme must be s3 or file"},
		{uri: "file:relative", err: "absolute path"},
	}
	for _, c := range cases {
		got, err := ParseURI(c.uri)
		if c.err != "" {
			if !errcode.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseURI(%q) = %v, want %s error containing %q", c.uri, err, errcode.InvalidArgument, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURI(%q): %v", c.uri, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseURI(%q) =\n %+v\nwant\n %+v", c.uri, got, c.want)
		}
	}
}

func TestParseOffset(t *testing.T) {
	good := map[string]int64{`{"logOffset":0}`: 0, `{"logOffset":12}`: 12, `7`: 7, ` {"logOffset": 3} `: 3}
	for in, want := range good {
		got, err := parseOffset(stream.Offset(in))
		if err != nil || got != want {
			t.Errorf("parseOffset(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{``, `{}`, `{"logOffset":-1}`, `-3`, `{"logOffset":1,"x":2}`, `{"logOffset":"1"}`, `1.5`, `{"logOffset":1}{}`, `null`} {
		if _, err := parseOffset(stream.Offset(in)); err == nil {
			t.Errorf("parseOffset(%q) succeeded", in)
		}
	}
	if n, err := parseOffset(nil); n != -1 || err != nil {
		t.Errorf("parseOffset(nil) = %d, %v", n, err)
	}
	if got := formatOffset(42); !bytes.Equal(got, []byte(`{"logOffset":42}`)) {
		t.Errorf("formatOffset = %s", got)
	}
}

func FuzzParseOffset(f *testing.F) {
	for _, s := range []string{`{"logOffset":3}`, `3`, `{}`, `{"logOffset":-1}`, `{"logOffset":1e3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parseOffset(stream.Offset(data))
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parsed negative offset %d from %q", n, data)
		}
		// Round trip: the canonical form parses to the same value.
		m, err := parseOffset(formatOffset(n))
		if err != nil || m != n {
			t.Fatalf("round trip of %d: %d, %v", n, m, err)
		}
	})
}

func FuzzParseLog(f *testing.F) {
	f.Add(int64(0), formatLog([]logEntry{{Path: "s3://b/date=2026-01-01/a.parquet", Timestamp: 1, BatchID: 0}}))
	f.Add(int64(9), formatLog([]logEntry{{Path: "file:///a%20b.parquet", Timestamp: 1, BatchID: 3}, {Path: "x", Timestamp: 2, BatchID: 9}}))
	f.Add(int64(1), []byte("v1\n{\"path\":\"a\",\"timestamp\":1,\"batchId\":1}\n"))
	f.Add(int64(1), []byte("v2\n"))
	f.Fuzz(func(t *testing.T, n int64, data []byte) {
		if n < 0 {
			n = -n
		}
		compact := isCompactID(n, defaultCompactInterval)
		es, err := parseLog("/log", n, compact, data)
		if err != nil {
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("error without CHECKPOINT_CORRUPT: %v", err)
			}
			return
		}
		// Whatever parses re-renders to a file that parses to the same entries.
		again, err := parseLog("/log", n, compact, formatLog(es))
		if err != nil || !reflect.DeepEqual(again, es) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, es, again)
		}
		for _, e := range es {
			if e.Path == "" || e.BatchID > n || e.BatchID < 0 || (!compact && e.BatchID != n) {
				t.Fatalf("accepted bad entry %+v in log %d", e, n)
			}
		}
	})
}

func TestNewFromURI(t *testing.T) {
	s, err := NewFromURI("file:///tmp/x/v1.0/eth/blocks?maxFilesPerTrigger=5", blockColumns())
	if err != nil {
		t.Fatal(err)
	}
	if s.Description() != "FileStreamSource[file:///tmp/x/v1.0/eth/blocks]" || s.opts.MaxFilesPerTrigger != 5 {
		t.Fatalf("%s %+v", s.Description(), s.opts)
	}
	if _, err := NewFromURI("s3://b/p?bogus=1", blockColumns()); !errcode.Is(err, errcode.InvalidArgument) {
		t.Fatalf("got %v", err)
	}
}
