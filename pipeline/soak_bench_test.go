package pipeline

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

var (
	soakBatches = flag.Int("soak.batches", 0, "BenchmarkSoak: live batches of one block to run (0 = skip the soak)")
	soakEvery   = flag.Int("soak.every", 1000, "BenchmarkSoak: report every N batches")
	soakVerbose = flag.Bool("soak.v", false, "BenchmarkSoak: print the phases of every batch over 100 ms")
)

// BenchmarkSoak runs the reference query live for -soak.batches batches of
// one block each (go test -run '^$' -bench Soak -benchtime 1x
// -soak.batches 10000 ./pipeline/) and reports, every -soak.every batches:
// median and p99 trigger->commit of those batches, the table's live files
// and files on disk, Delta log entries, checkpoint files and bytes, and
// RSS. Targets: live files <= 100, checkpoint files flat, p99 <= 4x median,
// RSS flat. The table's delta.deletedFileRetentionDuration and
// delta.logRetentionDuration are 1 minute, so auto-vacuum and the expired-log
// cleanup run within the soak.
func BenchmarkSoak(b *testing.B) {
	if *soakBatches <= 0 {
		b.Skip("pass -soak.batches N")
	}
	ctx := context.Background()
	dir := b.TempDir()
	archive := filepath.Join(dir, "archive")
	m, err := chain.GenerateArchive(ctx, chain.GenOptions{Out: archive, Preset: chain.RangePreset(chain.FirstDay, 1), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	node, err := chain.StartNode(ctx, chain.NodeOptions{Manifest: m, Seed: 1, Addr: "127.0.0.1:0", Manual: true,
		InitialBlocks: *soakBatches + 10})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	ckpt, table := filepath.Join(dir, "ck"), filepath.Join(dir, "table")
	if _, err := delta.Create(ctx, table, delta.SinkSchema(),
		delta.WithConfiguration(map[string]string{"delta.deletedFileRetentionDuration": "interval 1 minute",
			"delta.logRetentionDuration": "interval 1 minute"})); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var window []float64
	n := 0
	report := func() {
		sort.Float64s(window)
		med, p99 := window[len(window)/2], window[min(len(window)-1, len(window)*99/100)]
		live, onDisk, logEntries := tableFigures(b, table)
		files, bytes := treeFigures(b, ckpt)
		fmt.Fprintf(os.Stderr, "%7d  %8.1f  %8.1f  %5.2f  %6d  %7d  %7d  %7d  %9d  %6.0f\n",
			n, med, p99, p99/med, live, onDisk, logEntries, files, bytes, rssMB())
		window = window[:0]
	}
	fmt.Fprintf(os.Stderr, "%7s  %8s  %8s  %5s  %6s  %7s  %7s  %7s  %9s  %6s\n",
		"batches", "med ms", "p99 ms", "p99/m", "live", "on disk", "log", "ck files", "ck bytes", "RSS MB")
	listener := engine.ListenerFunc(func(p *stream.Progress) {
		if p.NumInputRows == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		window = append(window, float64(p.DurationMs[stream.DurTriggerExecution]))
		if *soakVerbose && p.DurationMs[stream.DurTriggerExecution] > 100 {
			fmt.Fprintf(os.Stderr, "slow batch %d: %v\n", p.BatchID, p.DurationMs)
		}
		if n%*soakEvery == 0 {
			report()
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
		MaxBatches: *soakBatches,
		Logger:     slog.New(slog.DiscardHandler),
		Listeners:  []engine.Listener{listener},
	}
	b.ResetTimer()
	if _, err := Run(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

// tableFigures: live data files, data files on disk, _delta_log entries.
func tableFigures(b *testing.B, table string) (live, onDisk, logEntries int) {
	ctx := context.Background()
	t, err := delta.OpenFS(ctx, vfs.Default, table)
	if err != nil {
		b.Fatal(err)
	}
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		b.Fatal(err)
	}
	live = len(s.Files())
	logs, _ := os.ReadDir(filepath.Join(table, "_delta_log"))
	logEntries = len(logs)
	_ = filepath.WalkDir(table, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.Contains(p, "_delta_log") {
			onDisk++
		}
		return nil
	})
	return live, onDisk, logEntries
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
