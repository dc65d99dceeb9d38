package s3archive

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/ethstream/ethstream/stream"
)

// BenchmarkBackfillReads replays a backfill's reads without the engine:
// availableNow, 365 files per trigger, timestamp+miner+number, from file://
// and through the embedded S3 endpoint, over the archive in
// $ETHSTREAM_BENCH_ARCHIVE (a directory holding the bucket folder
// aws-public-blockchain, e.g. a bench work directory's s3/; skipped when
// unset). Reported per backfill: CPU seconds, seconds in LatestOffset
// (listing) and in ReadBatch, store requests and megabytes fetched; the
// S3 figures against the file:// ones are the endpoint's cost.
func BenchmarkBackfillReads(b *testing.B) {
	root := os.Getenv("ETHSTREAM_BENCH_ARCHIVE")
	if root == "" {
		b.Skip("ETHSTREAM_BENCH_ARCHIVE not set")
	}
	for _, via := range []string{"file", "s3"} {
		b.Run(via, func(b *testing.B) {
			o := Options{URI: fileURI(filepath.Join(root, "aws-public-blockchain/v1.0/eth/blocks")), MaxFilesPerTrigger: 365}
			if via == "s3" {
				srv, err := s3serve.Start(context.Background(), s3serve.Options{Root: root, Addr: "127.0.0.1:0"})
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Close()
				if o, err = ParseURI("s3://aws-public-blockchain/v1.0/eth/blocks?anonymous=true&maxFilesPerTrigger=365&endpoint=" + srv.URL()); err != nil {
					b.Fatal(err)
				}
			}
			var listT, readT time.Duration
			var requests, bytes int64
			cpu0 := cputime.Self()
			for range b.N {
				s := openSource(b, o, testEnv(b, vfs.NewMem(), ethblock.ColBlockTS, ethblock.ColMiner, ethblock.ColNumber))
				ctx := context.Background()
				t := time.Now()
				if err := s.PrepareAvailableNow(ctx); err != nil {
					b.Fatal(err)
				}
				listT += time.Since(t)
				var start stream.Offset
				for {
					t := time.Now()
					end, err := s.LatestOffset(ctx, start)
					if err != nil {
						b.Fatal(err)
					}
					listT += time.Since(t)
					if string(end) == string(start) {
						break
					}
					t = time.Now()
					if err := s.ReadBatch(ctx, start, end, func(*stream.Batch) error { return nil }); err != nil {
						b.Fatal(err)
					}
					readT += time.Since(t)
					start = end
				}
				requests += s.m.requests.Load()
				bytes += s.m.bytesRead.Load()
			}
			n := float64(b.N)
			b.ReportMetric((cputime.Self()-cpu0).Seconds()/n, "cpu-s/op")
			b.ReportMetric(listT.Seconds()/n, "list-s/op")
			b.ReportMetric(readT.Seconds()/n, "read-s/op")
			b.ReportMetric(float64(requests)/n, "requests/op")
			b.ReportMetric(float64(bytes)/n/1e6, "MB/op")
		})
	}
}
