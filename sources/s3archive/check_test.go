package s3archive

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

// TestCheck probes file:// and S3 locations (a real S3 server over loopback)
// and writes nothing.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bucket := filepath.Join(root, "bkt")
	writeDays(t, bucket, day0, 1, 5, "modern")
	if err := os.MkdirAll(filepath.Join(bucket, "v1.0", "btc", "blocks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bucket, "v1.0", "btc", "blocks", "_SUCCESS"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f := startFakeS3(t, root)
	cases := []struct {
		opts Options
		code string
	}{
		{opts: Options{URI: "file://" + filepath.Join(bucket, "v1.0", "eth", "blocks")}},
		{opts: Options{URI: "file://" + filepath.Join(root, "missing")}, code: CodeArchiveNotFound},
		{opts: Options{URI: "file://" + file}, code: CodeArchiveNotFound},
		{opts: Options{URI: "file://" + filepath.Join(bucket, "v1.0", "btc", "blocks")}, code: CodeArchiveEmpty},
		{opts: s3Opts(f, "s3://bkt/v1.0/eth/blocks")},
		{opts: s3Opts(f, "s3://bkt/v1.0/btc/blocks"), code: CodeArchiveEmpty},
		{opts: s3Opts(f, "s3://no-such-bucket/v1.0/eth/blocks"), code: ArchiveFileUnreadable},
	}
	before := treeSnapshot(t, root)
	for _, c := range cases {
		s, err := New(withBlocks(c.opts))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(ctx); errcode.Code(err) != c.code {
			t.Errorf("%s: Check = %v, want code %q", c.opts.URI, err, c.code)
		}
	}
	if after := treeSnapshot(t, root); after != before {
		t.Errorf("Check wrote under %s", root)
	}
}

// treeSnapshot lists every path under dir with its size.
func treeSnapshot(t *testing.T, dir string) string {
	t.Helper()
	var s string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		s += p + " " + info.Mode().String() + "\n"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
