package s3archive

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/ethstream/ethstream/stream"
)

var (
	benchOnce sync.Once
	benchRoot string
	benchMan  *archivegen.Manifest
	benchErr  error
)

// benchArchive generates the demo preset (60 days) once per machine under
// the temp dir, in bucket "archive", and re-uses it while its manifest reads.
func benchArchive(b *testing.B) (string, *archivegen.Manifest) {
	benchOnce.Do(func() {
		benchRoot = filepath.Join(os.TempDir(), "ethstream-s3archive-bench-demo-seed1")
		out := filepath.Join(benchRoot, "archive")
		if m, err := archivegen.ReadManifest(out); err == nil {
			benchMan = m
			return
		}
		p, err := chain.PresetByName("demo")
		if err != nil {
			benchErr = err
			return
		}
		benchMan, benchErr = archivegen.Generate(context.Background(), archivegen.Options{Out: out, Preset: p, Seed: 1})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchRoot, benchMan
}

// BenchmarkDecode reads the whole demo archive per iteration, with the seven
// block columns or only timestamp+miner, from file:// and through the
// embedded S3 endpoint. Reported: rows/s, MB/s of archive files, and the
// bytes fetched as a fraction of the files' size.
func BenchmarkDecode(b *testing.B) {
	root, m := benchArchive(b)
	projections := map[string][]string{
		"seven":    ethblock.Core,
		"ts+miner": {ethblock.ColBlockTS, ethblock.ColMiner},
	}
	for _, via := range []string{"file", "s3"} {
		for _, pname := range []string{"seven", "ts+miner"} {
			b.Run(via+"/"+pname, func(b *testing.B) {
				var o Options
				if via == "s3" {
					srv, err := s3serve.Start(context.Background(), s3serve.Options{Root: root, Addr: "127.0.0.1:0"})
					if err != nil {
						b.Fatal(err)
					}
					defer srv.Close()
					o, err = ParseURI("s3://archive/v1.0/eth/blocks?anonymous=true&endpoint=" + srv.URL())
					if err != nil {
						b.Fatal(err)
					}
				} else {
					o = Options{URI: fileURI(filepath.Join(root, "archive/v1.0/eth/blocks"))}
				}
				var rows, fetched int64
				cpu0 := cputime.Self()
				b.ResetTimer()
				for range b.N {
					s := openSource(b, o, testEnv(b, vfs.NewMem(), projections[pname]...))
					end, err := s.LatestOffset(context.Background(), nil)
					if err != nil {
						b.Fatal(err)
					}
					err = s.ReadBatch(context.Background(), nil, end, func(bt *stream.Batch) error {
						rows += int64(bt.Len)
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					fetched += s.m.bytesRead.Load()
				}
				sec := b.Elapsed().Seconds()
				cpu := (cputime.Self() - cpu0).Seconds()
				// The machine is shared: CPU time per row is steadier than wall time.
				b.ReportMetric(float64(rows)/cpu, "rows/cpu-s")
				if rows != m.Rows*int64(b.N) {
					b.Fatalf("read %d rows, want %d", rows, m.Rows*int64(b.N))
				}
				b.ReportMetric(float64(rows)/sec, "rows/s")
				b.ReportMetric(float64(m.Bytes)*float64(b.N)/sec/1e6, "fileMB/s")
				b.ReportMetric(float64(fetched)/float64(m.Bytes)/float64(b.N), "fetched/size")
			})
		}
	}
}

// BenchmarkDecodeDay decodes one daily file of the demo archive (its last
// day, ~7,000 blocks, two row groups) per iteration from file://, through
// decodeFileWith with one decodeState carried across iterations as a
// decode worker carries it from file to file: the per-file cost of a
// backfill's decode, without listing, read-ahead or emission. "ref" is the
// reference query's projection (block_ts, miner); "chain" adds number,
// hash and parent_hash; "seven" is ethblock.Core.
func BenchmarkDecodeDay(b *testing.B) {
	root, m := benchArchive(b)
	last := m.Files[len(m.Files)-1]
	dir := filepath.Join(root, "archive")
	uri := fileURI(filepath.Join(dir, last.Key))
	projections := []struct {
		name string
		cols []string
	}{
		{"ref", []string{ethblock.ColBlockTS, ethblock.ColMiner}},
		{"chain", []string{ethblock.ColBlockTS, ethblock.ColMiner, ethblock.ColNumber, ethblock.ColHash, ethblock.ColParentHash}},
		{"seven", ethblock.Core},
	}
	for _, p := range projections {
		b.Run(p.name, func(b *testing.B) {
			mt := &metrics{}
			st := &localStore{fs: vfs.Default, root: dir, m: mt}
			ds := newDecodeState()
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cputime.Self()
			for b.Loop() {
				f, err := decodeFileWith(ctx, st, nil, ds, uri, last.Bytes, blockCols(p.cols), mt)
				if err != nil {
					b.Fatal(err)
				}
				if f.rows != last.Rows {
					b.Fatalf("decoded %d rows, want %d", f.rows, last.Rows)
				}
			}
			// The machine is shared: CPU time (this process's, GC
			// included) is steadier than wall time.
			b.ReportMetric(float64((cputime.Self()-cpu0).Nanoseconds())/float64(int64(b.N)*last.Rows), "cpu-ns/row")
		})
	}
}
