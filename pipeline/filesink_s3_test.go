package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/sinklog"
	"github.com/ethstream/ethstream/storage/s3test"
)

// TestFileSinkOnS3: --sink parquet:s3://bucket/prefix on the embedded
// endpoint and on Versity Gateway, its checkpoint local and on S3: a plain
// SELECT copies every source row exactly once across two runs, the part
// files and _spark_metadata/<batchId> are objects under the prefix, and the
// log names each part file by its s3:// URI.
func TestFileSinkOnS3(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "orders")
	var want []string
	for f := range 3 {
		var rows []e2eOrder
		for i := range 10 {
			o := e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: fmt.Sprintf("c%d", i%3), Amount: float64(f*10+i) / 4,
				EventTime: time.Date(2026, 3, 1, f, i, 0, 0, time.UTC)}
			rows = append(rows, o)
			want = append(want, fmt.Sprintf("%s %s %.2f", o.OrderID, o.Customer, o.Amount))
		}
		writeE2EOrders(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), rows)
	}
	slices.Sort(want)
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		for _, ckptOnS3 := range []bool{false, true} {
			t.Run(fmt.Sprintf("checkpoint-on-s3=%v", ckptOnS3), func(t *testing.T) {
				prefix := fmt.Sprintf("out-%v", ckptOnS3)
				cfg := Config{Checkpoint: filepath.Join(t.TempDir(), "ckpt"), Sink: "parquet:" + s.Location(prefix), LocalDir: t.TempDir(),
					Sources: []SourceSpec{{Name: "orders", Format: "parquet",
						URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1&schema=" +
							url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}},
					Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
					Conf:  map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
					Query: "SELECT order_id, customer, amount FROM orders", OutputMode: "append"}
				if ckptOnS3 {
					cfg.Checkpoint = s.Location("ckpt")
				}
				_, _, fs, err := Locations(cfg)
				if err != nil {
					t.Fatal(err)
				}
				out := "s3://" + s.Bucket + "/" + prefix
				read := func() []string {
					c, err := sinklog.ReadLog(fs, out)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, f := range c.Files {
						if !strings.HasPrefix(f.Path, out+"/part-") {
							t.Fatalf("log entry %s is not a part file under %s", f.Path, out)
						}
						fh, err := fs.Open(f.Path)
						if err != nil {
							t.Fatal(err)
						}
						b, err := io.ReadAll(fh)
						fh.Close()
						if err != nil {
							t.Fatal(err)
						}
						pf, err := parquet.OpenFile(strings.NewReader(string(b)), int64(len(b)))
						if err != nil {
							t.Fatal(err)
						}
						rows := make([]fileSinkOrder, pf.NumRows())
						if n, err := parquet.NewGenericReader[fileSinkOrder](pf).Read(rows); n != len(rows) || (err != nil && err != io.EOF) {
							t.Fatalf("%s: %d rows: %v", f.Path, n, err)
						}
						for _, r := range rows {
							got = append(got, fmt.Sprintf("%s %s %.2f", *r.OrderID, *r.Customer, *r.Amount))
						}
					}
					slices.Sort(got)
					return got
				}
				for run := range 2 {
					if _, err := Run(context.Background(), cfg); err != nil {
						t.Fatal(err)
					}
					if got := read(); !slices.Equal(got, want) {
						t.Fatalf("run %d: file sink\n%v\nwant\n%v", run, got, want)
					}
				}
				keys := s.Keys(t, prefix+"/")
				var parts, logs int
				for _, k := range keys {
					switch {
					case strings.HasPrefix(k, prefix+"/part-"):
						parts++
					case strings.HasPrefix(k, prefix+"/"+sinklog.MetadataDir+"/"):
						logs++
					default:
						t.Errorf("unexpected object %s", k)
					}
				}
				if parts != 3 || logs != 3 {
					t.Fatalf("objects under %s: %v (want 3 part files and 3 log files)", prefix, keys)
				}
			})
		}
	})
}
