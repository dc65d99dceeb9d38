package files

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ethstream/ethstream/storage/s3test"
)

// TestS3Location streams Parquet files under s3:// through the embedded
// endpoint (and Versity Gateway when CI runs one): the partition value
// comes from the key, a key with a space is logged URL-encoded and read
// back, and hidden objects are skipped.
func TestS3Location(t *testing.T) {
	s3test.Run(t, func(t *testing.T, srv s3test.Server) {
		t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		local := t.TempDir()
		put := func(key string, data []byte) {
			if _, err := srv.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
				t.Fatal(err)
			}
		}
		var want []string
		for i, region := range []string{"us", "eu west"} {
			rows := someOrders(fmt.Sprint(i), 4, t0)
			p := writeParquetFile(t, local, fmt.Sprintf("f%d.parquet", i), rows)
			put("orders/region="+region+"/part-0.parquet", mustRead(t, p))
			for _, o := range rows {
				want = append(want, orderRow(o, region))
			}
		}
		put("orders/_SUCCESS", nil)
		put("orders/region=us/.hidden.parquet", []byte("x"))
		uri := srv.Location("orders") + "&schema=" + url.QueryEscape(ordersDDL) + "&maxFilesPerTrigger=1"
		s := mustSource(t, Parquet, uri)
		env := testEnv(t)
		if err := s.Open(t.Context(), env); err != nil {
			t.Fatal(err)
		}
		bs, end := drain(t, s, nil)
		slices.Sort(want)
		if got := flat(bs); len(bs) != 2 || !slices.Equal(got, want) || string(end) != `{"logOffset":1}` {
			t.Fatalf("got %v (end %s), want %v", bs, end, want)
		}
		if log := readAll(t, env, "0") + readAll(t, env, "1"); !bytes.Contains([]byte(log), []byte("s3://"+srv.Bucket+"/orders/region=eu%20west/part-0.parquet")) {
			t.Fatalf("log:\n%s", log)
		}
	})
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
