package s3serve

import (
	"context"
	"errors"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/parquet-go/parquet-go"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/listen"
)

func s3Client(url string, anonymous bool) *s3.Client {
	o := s3.Options{
		BaseEndpoint: aws.String(url),
		Region:       "us-east-2",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
	if anonymous {
		o.Credentials = aws.AnonymousCredentials{}
	}
	return s3.New(o)
}

// writeTree creates files under root and returns their keys (relative to bucket).
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for k, v := range files {
		p := filepath.Join(root, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func listAll(t *testing.T, c *s3.Client, bucket, prefix, delim string, maxKeys int32) (keys, prefixes []string, pages int) {
	t.Helper()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(maxKeys)}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	p := s3.NewListObjectsV2Paginator(c, in)
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range out.Contents {
			keys = append(keys, *o.Key)
		}
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, *cp.Prefix)
		}
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
	}
	return
}

func TestS3ListPaginationAndDelimiter(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{}
	var want []string
	for _, d := range []string{"2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05"} {
		for _, part := range []string{"part-0.parquet", "part-1.parquet"} {
			k := "v1.0/eth/blocks/date=" + d + "/" + part
			files["bkt/"+k] = d + part
			want = append(want, k)
		}
	}
	files["bkt/v1.0/eth/blocks-other/x"] = "x" // sorts after "blocks/" only by byte order
	files["bkt/v1.0/eth/blocks/date=2026-01-05/.part-2.parquet.tmp"] = "partial"
	files["bkt/v1.0/eth/blocks-other/x"] = "x"
	writeTree(t, root, files)
	srv, err := Start(context.Background(), Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, anon := range []bool{false, true} {
		c := s3Client(srv.URL(), anon)
		for _, mk := range []int32{1, 3, 1000} {
			keys, _, pages := listAll(t, c, "bkt", "v1.0/eth/blocks/", "", mk)
			if strings.Join(keys, ",") != strings.Join(want, ",") {
				t.Fatalf("maxKeys %d: keys %v, want %v", mk, keys, want)
			}
			if wantPages := (len(want) + int(mk) - 1) / int(mk); pages != wantPages {
				t.Fatalf("maxKeys %d: %d pages, want %d", mk, pages, wantPages)
			}
			keys, prefixes, _ := listAll(t, c, "bkt", "v1.0/eth/blocks/", "/", mk)
			if len(keys) != 0 || len(prefixes) != 5 || prefixes[0] != "v1.0/eth/blocks/date=2026-01-01/" {
				t.Fatalf("maxKeys %d delimited: keys %v prefixes %v", mk, keys, prefixes)
			}
			keys, prefixes, _ = listAll(t, c, "bkt", "v1.0/eth/blocks", "/", mk)
			if len(keys) != 0 || strings.Join(prefixes, ",") != "v1.0/eth/blocks-other/,v1.0/eth/blocks/" {
				t.Fatalf("maxKeys %d partial prefix: keys %v prefixes %v", mk, keys, prefixes)
			}
		}
	}
	c := s3Client(srv.URL(), false)
	// Unknown bucket and key.
	_, err = c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("nope")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "NoSuchBucket" {
		t.Fatalf("list unknown bucket: %v", err)
	}
	_, err = c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("nope")})
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "NoSuchKey" {
		t.Fatalf("get unknown key: %v", err)
	}
	_, err = c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("nope"), Key: aws.String("k")})
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "NoSuchBucket" {
		t.Fatalf("get from unknown bucket: %v", err)
	}
	// A key under an object's name (a path through a regular file).
	_, err = c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(want[0] + "/x")})
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "NoSuchKey" {
		t.Fatalf("get key below an object: %v", err)
	}
	sort.Strings(want)
}

func TestS3RangedGet(t *testing.T) {
	root := t.TempDir()
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	writeTree(t, root, map[string]string{"bkt/a/b.bin": string(body)})
	srv, err := Start(context.Background(), Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := s3Client(srv.URL(), true)
	for _, tc := range []struct {
		rng        string
		start, end int
	}{{"bytes=0-9", 0, 10}, {"bytes=1000-1999", 1000, 2000}, {"bytes=-8", len(body) - 8, len(body)}, {"bytes=1048000-", 1048000, len(body)}} {
		out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a/b.bin"), Range: aws.String(tc.rng)})
		if err != nil {
			t.Fatal(tc.rng, err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(body[tc.start:tc.end]) {
			t.Fatalf("%s: got %d bytes, want %d", tc.rng, len(got), tc.end-tc.start)
		}
		if *out.ContentLength != int64(tc.end-tc.start) {
			t.Fatalf("%s: content length %d", tc.rng, *out.ContentLength)
		}
	}
	head, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a/b.bin")})
	if err != nil || *head.ContentLength != int64(len(body)) {
		t.Fatalf("head: %v %v", err, head)
	}
	before := srv.Requests()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a/b.bin")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(got) != string(body) {
		t.Fatal("full get differs")
	}
	if srv.Requests() != before+1 {
		t.Fatalf("requests %d -> %d", before, srv.Requests())
	}
}

func TestS3PutIsAtomicAndConditional(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "bkt"), 0o755)
	srv, err := Start(context.Background(), Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := s3Client(srv.URL(), false)
	ctx := context.Background()
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("t/_delta_log/0.json"), Body: strings.NewReader("v0"), IfNoneMatch: aws.String("*")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("t/_delta_log/0.json"), Body: strings.NewReader("v1"), IfNoneMatch: aws.String("*")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "PreconditionFailed" {
		t.Fatalf("second put-if-absent: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "bkt/t/_delta_log/0.json"))
	if string(b) != "v0" {
		t.Fatalf("content %q", b)
	}
	des, _ := os.ReadDir(filepath.Join(root, "bkt/t/_delta_log"))
	if len(des) != 1 {
		t.Fatalf("temp files left: %v", des)
	}
}

func TestS3Faults(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"bkt/k": "v"})
	srv, err := Start(context.Background(), Options{Root: root, Addr: "127.0.0.1:0", Faults: Faults{ThrottleRate: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := s3.New(s3.Options{BaseEndpoint: aws.String(srv.URL()), Region: "us-east-2", UsePathStyle: true,
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1})
	_, err = c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "SlowDown" {
		t.Fatalf("throttled get: %v", err)
	}
	srv.SetFaults(Faults{ErrorRate: 0.3, ThrottleRate: 0.1, Seed: 3})
	// A retrying client rides through the faults.
	c2 := s3.New(s3.Options{BaseEndpoint: aws.String(srv.URL()), Region: "us-east-2", UsePathStyle: true,
		Credentials: aws.AnonymousCredentials{},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 10
			o.RateLimiter = ratelimit.None
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		})})
	for i := 0; i < 10; i++ {
		out, err := c2.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
		if err != nil {
			t.Fatalf("get %d with retries: %v", i, err)
		}
		out.Body.Close()
	}
	srv.SetFaults(Faults{})
}

func TestS3BadInput(t *testing.T) {
	_, err := Start(context.Background(), Options{Root: filepath.Join(t.TempDir(), "missing")})
	if errcode.Code(err) != CodeRootNotFound {
		t.Fatalf("missing root: %v", err)
	}
	srv, err := Start(context.Background(), Options{Root: t.TempDir(), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, err = Start(context.Background(), Options{Root: t.TempDir(), Addr: strings.TrimPrefix(srv.URL(), "http://")})
	if errcode.Code(err) != listen.CodeAddressInUse {
		t.Fatalf("busy port: %v", err)
	}
}

// s3ReaderAt reads an object with ranged GETs, as an archive reader does.
type s3ReaderAt struct {
	c           *s3.Client
	bucket, key string
	size        int64
	gets        int
}

func (r *s3ReaderAt) Size() int64 { return r.size }

func (r *s3ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r.gets++
	out, err := r.c.GetObject(context.Background(), &s3.GetObjectInput{
		Bucket: aws.String(r.bucket), Key: aws.String(r.key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1)),
	})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	n, err := io.ReadFull(out.Body, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}

// TestS3ServesParquetTree lists a date-partitioned tree of Parquet files
// (the shape of a Spark-written table) through the endpoint with small
// pages and reads a file's footer and rows with ranged GETs.
func TestS3ServesParquetTree(t *testing.T) {
	type row struct {
		N int64  `parquet:"n,delta"`
		S string `parquet:"s"`
	}
	root := t.TempDir()
	bucket := "lake"
	var want []string
	var sizes []int64
	for d := 1; d <= 3; d++ {
		key := fmt.Sprintf("t/date=2026-01-%02d/part-00000-c000.snappy.parquet", d)
		rows := make([]row, 5000)
		for i := range rows {
			rows[i] = row{int64(d*10_000 + i), fmt.Sprintf("0x%064x", d*10_000+i)}
		}
		p := filepath.Join(root, bucket, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w := parquet.NewGenericWriter[row](f, parquet.Compression(&parquet.Snappy))
		for _, half := range [][]row{rows[:2500], rows[2500:]} { // two row groups
			if _, err := w.Write(half); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := errors.Join(w.Close(), f.Close()); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want, sizes = append(want, key), append(sizes, fi.Size())
	}
	srv, err := Start(context.Background(), Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := s3Client(srv.URL(), true)
	keys, _, pages := listAll(t, c, bucket, "t/", "", 1)
	if strings.Join(keys, ",") != strings.Join(want, ",") || pages != len(want) {
		t.Fatalf("listed %v in %d pages, want %v", keys, pages, want)
	}
	_, prefixes, _ := listAll(t, c, bucket, "t/", "/", 1)
	if len(prefixes) != len(want) || prefixes[0] != "t/date=2026-01-01/" {
		t.Fatalf("date prefixes %v", prefixes)
	}
	ra := &s3ReaderAt{c: c, bucket: bucket, key: want[0], size: sizes[0]}
	pf, err := parquet.OpenFile(ra, sizes[0])
	if err != nil {
		t.Fatal(err)
	}
	if pf.NumRows() != 5000 || len(pf.RowGroups()) != 2 {
		t.Fatalf("rows %d in %d row groups, wrote 5000 in 2", pf.NumRows(), len(pf.RowGroups()))
	}
	footerGets := ra.gets
	rows := make([]row, 5000)
	r := parquet.NewGenericReader[row](ra)
	n, err := r.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if n != 5000 || rows[0].N != 10_000 || rows[n-1].N != 14_999 || rows[n-1].S != fmt.Sprintf("0x%064x", 14_999) {
		t.Fatalf("read %d rows via S3: first %d last %d", n, rows[0].N, rows[n-1].N)
	}
	t.Logf("%d-byte file: footer in %d ranged GETs, rows in %d more; %d requests total", sizes[0], footerGets, ra.gets-footerGets, srv.Requests())
}

// TestS3TempShapedKeys: a client's key shaped like a write in progress
// (".name.hex.tmp", what a dead writer leaves on S3) is stored, listed, read
// and deleted like any key, as on any S3 server, while the backend's own
// writes in progress (a ".*.tmp" file on disk) stay unlisted. A key starting
// with the escape mark round-trips too, and keys list in byte order.
func TestS3TempShapedKeys(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"bkt/t/a":                "a",
		"bkt/t/.part-2.tmp":      "backend write in progress",
		"bkt/t/_delta_log/x.crc": "c",
	})
	srv, err := Start(context.Background(), Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := s3Client(srv.URL(), false)
	ctx := context.Background()
	put := []string{"t/.00009.json.0123456789abcdef.tmp", "t/%a", "t/%.b.tmp", "t/_delta_log/.9.json.ab.tmp"}
	for _, k := range put {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k),
			Body: strings.NewReader("body of " + k)}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	want := []string{"t/%.b.tmp", "t/%a", "t/.00009.json.0123456789abcdef.tmp", "t/_delta_log/.9.json.ab.tmp", "t/_delta_log/x.crc", "t/a"}
	for _, mk := range []int32{1, 2, 1000} {
		keys, _, _ := listAll(t, c, "bkt", "t/", "", mk)
		if strings.Join(keys, ",") != strings.Join(want, ",") {
			t.Fatalf("maxKeys %d: keys %v, want %v", mk, keys, want)
		}
	}
	for _, k := range put {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k)})
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		b, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if string(b) != "body of "+k {
			t.Fatalf("get %s: %q", k, b)
		}
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k)}); err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
	}
	keys, _, _ := listAll(t, c, "bkt", "t/", "", 1000)
	if strings.Join(keys, ",") != "t/_delta_log/x.crc,t/a" {
		t.Fatalf("after deletes: %v", keys)
	}
	if _, err := os.Stat(filepath.Join(root, "bkt/t/.part-2.tmp")); err != nil {
		t.Fatalf("the backend's own temp file: %v", err)
	}
}
