package pipeline

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/storage/s3test"
)

// uploadArchive copies the fault loop's archive under prefix of s's bucket
// and returns the s3archive URI of its blocks on the server srv (s itself,
// or s behind a proxy).
func uploadArchive(t *testing.T, s, srv s3test.Server, prefix string) string {
	t.Helper()
	root := mustArchive(t)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = s.Client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(s.Bucket),
			Key: aws.String(prefix + "/" + filepath.ToSlash(rel)), Body: f})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv.Location(prefix+"/v1.0/eth/blocks") + "&maxFilesPerTrigger=1"
}

// TestArchiveEndpointProbed: the s3archive source's endpoint is probed
// once with the checkpoint's and the table's (issue 28, one probe per
// endpoint), by a listing where the source lists. A dead archive endpoint
// fails the start with STORAGE_UNAVAILABLE naming it, the archive's
// location and the last error, after one retry budget
// (one probe: DefaultRetry.Attempts requests, waiting on the query's
// clock), and the local checkpoint is not even created. A live one serves the query, whose table equals
// the recount.
func TestArchiveEndpointProbed(t *testing.T) {
	want := recount(t, mustArchive(t))
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		uri := uploadArchive(t, s, s, "archive")
		dir := t.TempDir()
		cfg := s3Config(filepath.Join(dir, "ck"), filepath.Join(dir, "table"), filepath.Join(dir, "cache"), uri)
		cfg.Clock = &waitClock{}
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if d := diffCounts(want, locTableCounts(t, cfg.Table)); d != "" {
			t.Fatalf("table of the S3 archive: %s", d)
		}

		for _, f := range []s3test.Fault{{Reset: true}, {Status: 503, Code: "SlowDown"}} {
			dead, counts := s.Faulty(t, s3test.Always(f))
			dir := t.TempDir()
			cfg := s3Config(filepath.Join(dir, "ck"), filepath.Join(dir, "table"), filepath.Join(dir, "cache"),
				strings.Replace(uri, "endpoint="+url.QueryEscape(s.Endpoint), "endpoint="+url.QueryEscape(dead.Endpoint), 1))
			clk := &waitClock{}
			cfg.Clock = clk
			_, err := Run(context.Background(), cfg)
			if clk.count() == 0 {
				t.Fatal("the archive endpoint's retries did not wait on the query's clock")
			}
			e := errcode.Resource(err)
			if e == nil || e.Code != errcode.StorageUnavailable {
				t.Fatalf("dead archive endpoint: %v, want %s", err, errcode.StorageUnavailable)
			}
			if msg := e.Error(); !strings.Contains(msg, dead.Endpoint) || !strings.Contains(msg, "last error") ||
				!strings.Contains(msg, "archive/v1.0/eth/blocks") {
				t.Fatalf("%q does not name the endpoint, the archive's location and the last error", msg)
			}
			if _, err := os.Stat(cfg.Checkpoint); !os.IsNotExist(err) {
				t.Fatalf("a start refused for a dead archive created its checkpoint: %v", err)
			}
			if sent := counts.Total(); sent != storage.DefaultRetry.Attempts {
				t.Fatalf("a dead archive endpoint was sent %d requests, want %d (one probe)", sent, storage.DefaultRetry.Attempts)
			}
		}
	})
}
