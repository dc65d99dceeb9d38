package pipeline

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/storage/s3test"
	"github.com/ethstream/ethstream/stream"
)

var (
	soakBatches = flag.Int("soak.batches", 0, "BenchmarkSoak: live batches of one block to run (0 = skip the soak)")
	soakEvery   = flag.Int("soak.every", 1000, "BenchmarkSoak: report every N batches")
	soakVerbose = flag.Bool("soak.v", false, "BenchmarkSoak: print what the batches at or over each window's p99 did")
	soakHeap    = flag.String("soak.heapprofile", "", "BenchmarkSoak: write heap profiles PREFIX.N after -soak.every batches and at the end")
	soakS3      = flag.String("soak.s3", "", "BenchmarkSoak: put the checkpoint and the table on S3: embedded or versity (ETHSTREAM_VERSITY_*)")
	soakWM      = flag.String("soak.watermark", "block_ts, 1 hour", "BenchmarkSoak: the reference query's withWatermark (\"\" = its own 48 hours, which 10,000 blocks of 12 s never pass)")
	soakDisk    = flag.Bool("soak.disk", false, "BenchmarkSoak: time 1,000 rounds of 6 fsynced publishes alone before and after the soak (the disk's own p99/median)")
)

// BenchmarkSoak runs the reference query live for -soak.batches batches of
// one block each (go test -run '^$' -bench Soak -benchtime 1x
// -soak.batches 10000 ./pipeline/) and reports, every -soak.every batches
// (the first batch, which opens the sources and creates the table, left
// out):
//
//   - med/p99 ms: trigger->commit (durationMs.triggerExecution: from the
//     trigger to the batch's commit, i.e. latestOffset, planning, the
//     offsets write, read, aggregation, the Delta MERGE commit, the state
//     commit with its share of state garbage collection, the commits entry
//     and the offset-log purge);
//   - wall med/p99: the full cycle, from one progress event to the next:
//     trigger->commit plus the progress append, the listeners and the loop;
//   - bg ms/b, bg max: the Delta maintenance that ran off the batch's path
//     (checkpoints, auto-compaction, vacuum, log cleanup) as the sink's
//     progress metrics report it, per batch on average and the most one
//     batch reported (it overlaps later batches, which the two timings
//     above show);
//   - the table's live files, data files in the store and Delta log
//     entries; checkpoint files and bytes; the state's rows; RSS, the live Go heap and the
//     memory the Go runtime holds (the rest of the RSS is the binary and
//     C allocations).
//
// The reference query runs with a 1-hour watermark delay (-soak.watermark):
// with its own 48 hours, the soak's 10,000 blocks 12 s apart (33 hours of
// event time) never close a window, so the state, and the RSS with it, grows
// throughout and a week-long run's steady state is never reached; an hour
// reaches it after 300 batches, with the same per-batch work (each batch
// then also evicts the windows its watermark closes).
//
// Targets: live files <= 100, checkpoint files flat, p99 <= 4x median, RSS
// flat. The table's delta.deletedFileRetentionDuration and
// delta.logRetentionDuration are 10 seconds, so auto-vacuum and the
// expired-log cleanup reach their steady state within the soak.
// -soak.s3 embedded|versity puts the checkpoint and the table on S3 (the
// embedded endpoint, or the Versity Gateway of ETHSTREAM_VERSITY_*);
// -soak.v prints what the batches at or over each window's p99 did (every
// FS call of the local store, by file kind and maintenance; it keeps every
// batch's record, so its RSS is not the query's), and
// -soak.disk times fsync-bound publishes alone before and after the soak,
// the floor of the local disk's own p99/median.
func BenchmarkSoak(b *testing.B) {
	if *soakBatches <= 0 {
		b.Skip("pass -soak.batches N")
	}
	if *soakDisk {
		diskFloor(b)
	}
	ctx := context.Background()
	dir := b.TempDir()
	m := oneDayArchive(b, dir)
	// The node runs in this process: its block cache is kept small so that
	// it does not show as the query's memory growth.
	node, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 1, Addr: "127.0.0.1:0", Manual: true,
		InitialBlocks: *soakBatches + 10, CachedBlocks: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	ckpt, table := filepath.Join(dir, "ck"), filepath.Join(dir, "table")
	var srv *s3test.Server
	switch *soakS3 {
	case "":
	case "embedded":
		s := s3test.Embedded(b)
		srv = &s
	case "versity":
		s := s3test.Versity(b)
		srv = &s
	default:
		b.Fatalf("-soak.s3 %q: want embedded or versity", *soakS3)
	}
	if srv != nil {
		ckpt, table = srv.Location("soak/checkpoint"), srv.Location("soak/table")
	}
	_, tablePath, storeFS, err := Locations(Config{Checkpoint: ckpt, Table: table})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := delta.Create(ctx, tablePath, delta.SinkSchema(), delta.WithFS(storeFS),
		delta.WithConfiguration(map[string]string{"delta.deletedFileRetentionDuration": "interval 10 seconds",
			"delta.logRetentionDuration": "interval 10 seconds"})); err != nil {
		b.Fatal(err)
	}
	figures := func() (live, onDisk, logEntries, files int, bytes int64) {
		live = liveFiles(b, storeFS, tablePath)
		if srv == nil {
			onDisk, logEntries = localTableFigures(table)
			files, bytes = treeFigures(b, ckpt)
			return
		}
		for _, o := range objects(b, *srv, "soak/table/") {
			switch {
			case strings.HasPrefix(o.key, "soak/table/_delta_log/"):
				logEntries++
			case strings.HasSuffix(o.key, ".parquet"):
				onDisk++
			}
		}
		for _, o := range objects(b, *srv, "soak/checkpoint/") {
			files++
			bytes += o.size
		}
		return
	}
	rec := newSoakRecorder(ckpt, table)
	var mu sync.Mutex
	var window, all []*soakBatch
	n := 0
	last := time.Now()
	report := func() {
		trig, wall := soakQuantiles(window, func(b *soakBatch) float64 { return b.trigger }),
			soakQuantiles(window, func(b *soakBatch) float64 { return b.wall })
		live, onDisk, logEntries, files, bytes := figures()
		heap, goRT := goMB()
		var maint, maintMax float64
		for _, b := range window {
			maint += b.maintMs() / float64(len(window))
			maintMax = max(maintMax, b.maintMs())
		}
		fmt.Fprintf(os.Stderr, "%7d  %8.1f  %8.1f  %5.2f  %8.1f  %8.1f  %5.2f  %7.1f  %8.0f  %6d  %7d  %7d  %7d  %9d  %6d  %6.0f  %6.1f  %6.1f\n",
			n, trig[0], trig[1], trig[1]/trig[0], wall[0], wall[1], wall[1]/wall[0], maint, maintMax,
			live, onDisk, logEntries, files, bytes, window[len(window)-1].stateRows, rssMB(), heap, goRT)
		if *soakVerbose {
			soakExplain(window, trig[1])
		}
		window = window[:0]
	}
	fmt.Fprintf(os.Stderr, "%7s  %8s  %8s  %5s  %8s  %8s  %5s  %7s  %8s  %6s  %7s  %7s  %7s  %9s  %6s  %6s  %6s  %6s\n",
		"batches", "med ms", "p99 ms", "p99/m", "wall med", "wall p99", "p99/m", "bg ms/b", "bg max", "live", "on disk", "log", "ck files", "ck bytes", "state", "RSS MB", "heap", "Go MB")
	listener := engine.ListenerFunc(func(p *stream.Progress) {
		now := time.Now()
		ops := rec.take()
		cycles, pause := rec.gc()
		if p.NumInputRows == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		sb := &soakBatch{id: p.BatchID, trigger: float64(p.DurationMs[stream.DurTriggerExecution]),
			wall: float64(now.Sub(last)) / 1e6, dur: p.DurationMs, ops: ops, gcCycles: cycles, gcPause: pause,
			metrics: p.Sink.Metrics}
		for _, o := range p.StateOperators {
			sb.stateRows += o.NumRowsTotal
		}
		last = now
		if n == 1 {
			return // the first batch opens the sources and creates the table
		}
		window = append(window, sb)
		if *soakVerbose {
			all = append(all, sb)
		}
		if n%*soakEvery == 0 {
			report()
		}
		if *soakHeap != "" && (n == *soakEvery || n == *soakBatches) {
			writeHeapProfile(b, fmt.Sprintf("%s.%d", *soakHeap, n))
			// The profile's GC and write are not the next batch's.
			rec.take()
			rec.gc()
			last = time.Now()
		}
	})
	uri := fmt.Sprintf("%s?maxBlocksPerTrigger=1&start_block=%d&confirmations=0&start_parent_hash=%s",
		node.URL(), m.LastBlock+1, m.LastHash)
	cfg := Config{
		Checkpoint: ckpt, Table: table, LocalDir: filepath.Join(dir, "cache"),
		Sources: []SourceSpec{{Name: "eth_live", Format: "ethrpc", URI: uri}},
		Conf: map[string]string{"spark.sql.shuffle.partitions": "8",
			"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Trigger:    engine.Trigger{Kind: engine.ProcessingTime, Interval: 0},
		MaxBatches: *soakBatches, WithWatermark: *soakWM,
		Logger:    slog.New(slog.DiscardHandler),
		Listeners: []engine.Listener{listener},
	}
	if srv == nil {
		// The local store is instrumented (an S3 store's calls are HTTP
		// requests inside package storage).
		cfg.FS = &soakFS{FS: vfs.Default, rec: rec}
	}
	b.ResetTimer()
	if _, err := Run(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if *soakDisk {
		diskFloor(b) // the disk may have changed over the soak: again
	}
	if *soakVerbose && len(all) > 0 {
		fmt.Fprintln(os.Stderr, "whole run:")
		soakExplain(all, soakQuantiles(all, func(b *soakBatch) float64 { return b.trigger })[1])
	}
}

// soakQuantiles is the median and p99 of f over bs.
func soakQuantiles(bs []*soakBatch, f func(*soakBatch) float64) [2]float64 {
	v := make([]float64, len(bs))
	for i, b := range bs {
		v[i] = f(b)
	}
	sort.Float64s(v)
	return [2]float64{v[len(v)/2], v[min(len(v)-1, len(v)*99/100)]}
}

// soakExplain prints the batches at or over the p99 and the mean FS time
// per batch, by key, of those batches against all of them.
func soakExplain(bs []*soakBatch, p99 float64) {
	var slow []*soakBatch
	for _, b := range bs {
		if b.trigger >= p99 {
			slow = append(slow, b)
		}
	}
	for _, b := range slow {
		fmt.Fprintln(os.Stderr, "  slow", b.describe())
	}
	ps, pa := soakProfile(slow), soakProfile(bs)
	keys := make([]string, 0, len(pa))
	for k := range pa {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return ps[keys[i]] > ps[keys[j]] })
	fmt.Fprintf(os.Stderr, "  fs ms/batch (slow vs all):")
	for i, k := range keys {
		if i == 12 || ps[k] < 0.5 {
			break
		}
		fmt.Fprintf(os.Stderr, " [%s %.1f vs %.1f]", k, ps[k], pa[k])
	}
	var gs, ga float64
	for _, b := range slow {
		gs += float64(b.gcPause) / 1e6 / float64(len(slow))
	}
	for _, b := range bs {
		ga += float64(b.gcPause) / 1e6 / float64(len(bs))
	}
	fmt.Fprintf(os.Stderr, "; gc pause %.2f vs %.2f ms\n", gs, ga)
}

func writeHeapProfile(b *testing.B, path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// goMB is the live heap and the memory the Go runtime holds from the OS
// (the rest of the RSS is the binary and C allocations: Pebble's memtables
// and block cache).
func goMB() (heap, runtime float64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64()) / (1 << 20), float64(s[1].Value.Uint64()-s[2].Value.Uint64()) / (1 << 20)
}

// liveFiles is the number of live data files of the table.
func liveFiles(b *testing.B, fs vfs.FS, table string) int {
	ctx := context.Background()
	t, err := delta.OpenFS(ctx, fs, table)
	if err != nil {
		b.Fatal(err)
	}
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		b.Fatal(err)
	}
	return len(s.Files())
}

type s3Object struct {
	key  string
	size int64
}

// objects lists the server's objects under prefix.
func objects(b *testing.B, s s3test.Server, prefix string) []s3Object {
	var out []s3Object
	p := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range page.Contents {
			out = append(out, s3Object{aws.ToString(o.Key), aws.ToInt64(o.Size)})
		}
	}
	return out
}

// localTableFigures: data files on disk, _delta_log entries.
func localTableFigures(table string) (onDisk, logEntries int) {
	logs, _ := os.ReadDir(filepath.Join(table, "_delta_log"))
	logEntries = len(logs)
	_ = filepath.WalkDir(table, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.Contains(p, "_delta_log") {
			onDisk++
		}
		return nil
	})
	return onDisk, logEntries
}

func treeFigures(b *testing.B, dir string) (files int, bytes int64) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
			if st, err := d.Info(); err == nil {
				bytes += st.Size()
			}
		}
		return nil
	})
	return files, bytes
}

func rssMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// diskFloor times 1,000 rounds of what a batch's publishes do to the local
// disk, without the engine: 6 files of 700 bytes, each written, fsynced,
// closed, with a directory fsync, and prints the median and p99 of a round.
func diskFloor(b *testing.B) {
	dir := b.TempDir()
	var rounds []float64
	buf := make([]byte, 700)
	for i := range 1000 {
		t0 := time.Now()
		for j := range 6 {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%d-%d", i, j)))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = f.Write(buf)
			_ = f.Sync()
			_ = f.Close()
			d, err := os.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			_ = d.Sync()
			_ = d.Close()
		}
		rounds = append(rounds, float64(time.Since(t0).Microseconds())/1000)
	}
	sort.Float64s(rounds)
	med, p99 := rounds[len(rounds)/2], rounds[len(rounds)*99/100]
	fmt.Fprintf(os.Stderr, "disk floor (6 fsynced publishes, no engine): median %.1f ms, p99 %.1f ms, p99/median %.2f\n", med, p99, p99/med)
}

// oneDayArchive generates the first day of the chain (seed 1) under
// dir/archive for a live benchmark's node to serve.
func oneDayArchive(b *testing.B, dir string) *archivegen.Manifest {
	b.Helper()
	m, err := archivegen.Generate(context.Background(), archivegen.Options{Out: filepath.Join(dir, "archive"),
		Preset: chain.RangePreset(chain.FirstDay, 1), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	return m
}
