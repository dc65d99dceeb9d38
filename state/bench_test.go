package state

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/cputime"
)

// Benchmarks (docs/contracts.md, Targets). Run them alone, the machine is shared:
//
//	go test -bench . ./state -run '^$'
//	go test -bench 'RSS/live' ./state -run '^$' -benchtime 1x    (peak RSS needs its own process)
//	go test -bench 'RSS/backfill' ./state -run '^$' -benchtime 1x
//
// The checkpoint is on the real disk (vfs.Default under b.TempDir()), like a
// production checkpoint, so commit times include the fsyncs.

func benchKeys(n int) [][]byte {
	ks := make([][]byte, n)
	for i := range ks {
		ks[i] = testKey(i)
	}
	return ks
}

func benchStore(b *testing.B, parts int) (*Store, string) {
	root := b.TempDir()
	opts := Options{
		Dir: filepath.Join(root, "ckpt", "state", "0"), FS: vfs.Default,
		LocalDir: filepath.Join(root, "cache"), Partitions: parts, Schema: testSchema,
	}
	s, err := Open(context.Background(), opts, -1)
	if err != nil {
		b.Fatal(err)
	}
	return s, root
}

func fill(b *testing.B, s *Store, keys [][]byte, version int64) {
	for i, k := range keys {
		if err := s.Put(k, testVal(int64(i))); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Commit(context.Background(), version); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCommit measures one batch (puts of `updated` keys, then Commit)
// over a state of max(3,200, updated) keys. commit-ms/op is the Commit call
// alone (durable delta or snapshot + Pebble apply).
func BenchmarkCommit(b *testing.B) {
	for _, updated := range []int{20, 700_000} {
		for _, parts := range []int{8, 200} {
			b.Run(fmt.Sprintf("updated=%d/partitions=%d", updated, parts), func(b *testing.B) {
				ctx := context.Background()
				keys := benchKeys(max(3200, updated))
				s, _ := benchStore(b, parts)
				defer s.Close()
				fill(b, s, keys, 0)
				v := int64(1)
				var commit time.Duration
				var snaps int
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					off := (i * 997) % len(keys)
					for j := range updated {
						if err := s.Put(keys[(off+j)%len(keys)], testVal(int64(i+j))); err != nil {
							b.Fatal(err)
						}
					}
					t := time.Now()
					m, err := s.Commit(ctx, v)
					if err != nil {
						b.Fatal(err)
					}
					commit += time.Since(t)
					if m.Snapshot {
						snaps++
					}
					v++
				}
				b.ReportMetric(float64(commit.Microseconds())/1000/float64(b.N), "commit-ms/op")
				b.ReportMetric(float64(snaps)/float64(b.N), "snapshots/op")
			})
		}
	}
}

// BenchmarkRepartition measures Repartition 200 -> 8 (snapshot to the
// checkpoint + local rebuild by ingestion). Between iterations the store is
// put back to 200 partitions, untimed.
func BenchmarkRepartition(b *testing.B) {
	for _, n := range []int{3200, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d/200to8", n), func(b *testing.B) {
			ctx := context.Background()
			s, _ := benchStore(b, 200)
			defer s.Close()
			fill(b, s, benchKeys(n), 0)
			v := int64(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if s.Partitions() != 200 {
					b.StopTimer()
					if _, err := s.Repartition(ctx, v, v+1, 200); err != nil {
						b.Fatal(err)
					}
					v++
					b.StartTimer()
				}
				st, err := s.Repartition(ctx, v, v+1, 8)
				if err != nil {
					b.Fatal(err)
				}
				v++
				if st.KeysAfter != int64(n) {
					b.Fatalf("keys after %d", st.KeysAfter)
				}
			}
		})
	}
}

// BenchmarkRepartitionAfterRestart measures Repartition 200 -> 8 right
// after a restart from a trusted cache, as the engine's control batch runs
// it: no old partition is open, so the base version is read from the
// checkpoint files. Open is not timed (it opens nothing).
func BenchmarkRepartitionAfterRestart(b *testing.B) {
	for _, n := range []int{3200, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d/200to8", n), func(b *testing.B) {
			ctx := context.Background()
			s, _ := benchStore(b, 200)
			opts := s.opts
			fill(b, s, benchKeys(n), 0)
			v := int64(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if s.Partitions() != 200 {
					if _, err := s.Repartition(ctx, v, v+1, 200); err != nil {
						b.Fatal(err)
					}
					v++
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				opts.Partitions = 200
				var err error
				if s, err = Open(ctx, opts, v); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				st, err := s.Repartition(ctx, v, v+1, 8)
				if err != nil {
					b.Fatal(err)
				}
				v++
				if st.KeysAfter != int64(n) {
					b.Fatalf("keys after %d", st.KeysAfter)
				}
			}
			b.StopTimer()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRSS reports the process's peak RSS (VmHWM) after running 200
// open partitions: "live" = 3,200 keys and 50 batches of 20 updates, then a
// full scan per batch (eviction); "backfill" = 5 batches of 700k updates
// over 3,200-window-like keys. Run each in its own process (-benchtime 1x).
func BenchmarkRSS(b *testing.B) {
	for _, c := range []struct {
		name             string
		keys, upd, batch int
	}{
		{"live", 3200, 20, 50},
		{"backfill", 700_000, 700_000, 5},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				s, _ := benchStore(b, 200)
				keys := benchKeys(c.keys)
				fill(b, s, keys, 0)
				for v := 1; v <= c.batch; v++ {
					for j := range c.upd {
						if err := s.Put(keys[(v*31+j)%len(keys)], testVal(int64(v))); err != nil {
							b.Fatal(err)
						}
					}
					if err := s.Scan(nil, AppendInt64Key(nil, 0), func(k, v []byte) error { return nil }); err != nil {
						b.Fatal(err)
					}
					m, err := s.Commit(ctx, int64(v))
					if err != nil {
						b.Fatal(err)
					}
					if v == c.batch {
						b.ReportMetric(float64(m.MemoryUsedBytes)/(1<<20), "state-mem-MB")
					}
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(vmHWM(b), "VmHWM-MB")
		})
	}
}

func vmHWM(b *testing.B) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkOpen measures a restart at 200 partitions with 3,200 keys and a
// delta chain: "cached" trusts the marker (the usual restart), "rebuild"
// starts without LocalDir (a fresh machine), "rebuild-in-memory" rebuilds
// a cache held in memory (the aggregation's restart). cpu-ms/op is the
// process's CPU from Open to the first Get.
func BenchmarkOpen(b *testing.B) {
	for _, name := range []string{"cached", "rebuild", "rebuild-in-memory"} {
		cached := name == "cached"
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s, _ := benchStore(b, 200)
			if name == "rebuild-in-memory" {
				// The aggregation's cache (Options.MemCacheBytes): Close
				// writes no marker, every Open rebuilds it into memory.
				s.opts.MemCacheBytes = 16 << 20
			}
			opts := s.opts
			keys := benchKeys(3200)
			fill(b, s, keys, 0)
			for v := 1; v <= 5; v++ {
				for j := range 20 {
					_ = s.Put(keys[(v*97+j)%len(keys)], testVal(int64(v)))
				}
				if _, err := s.Commit(ctx, int64(v)); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !cached {
					b.StopTimer()
					if err := os.RemoveAll(opts.LocalDir); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				c0 := cputime.Self()
				s, err := Open(ctx, opts, 5)
				if err != nil {
					b.Fatal(err)
				}
				// The first batch reads a key.
				if _, _, err := s.Get(keys[0]); err != nil {
					b.Fatal(err)
				}
				cpu += cputime.Self() - c0
				b.StopTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkCreate measures what a new query's state costs in the local
// cache at 200 partitions: Open of an empty checkpoint, one commit that
// touches every partition (3,200 keys), so that each partition's Pebble
// instance is created, and Close (a flush of each, and the marker): the
// instance files a seed backfill creates (issue 43). cpu-ms/op is the
// process's CPU, the kernel's file creates included.
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	keys := benchKeys(3200)
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := b.TempDir()
		opts := Options{
			Dir: filepath.Join(root, "ckpt", "state", "0"), FS: vfs.Default,
			LocalDir: filepath.Join(root, "cache"), Partitions: 200, Schema: testSchema,
		}
		b.StartTimer()
		c0 := cputime.Self()
		s, err := Open(ctx, opts, -1)
		if err != nil {
			b.Fatal(err)
		}
		fill(b, s, keys, 0)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		cpu += cputime.Self() - c0
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// BenchmarkIdle measures what 200 open partitions cost while nothing
// happens: each op is one second of an idle store whose partitions are all
// open (after a commit touching each); cpu-ms/op is the process's CPU in
// that second (Pebble's background goroutines).
func BenchmarkIdle(b *testing.B) {
	s, _ := benchStore(b, 200)
	defer s.Close()
	fill(b, s, benchKeys(3200), 0)
	if n := openCount(s); n != 200 {
		b.Fatalf("%d partitions open, want 200", n)
	}
	b.ResetTimer()
	c0 := cputime.Self()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second)
	}
	b.ReportMetric(float64((cputime.Self()-c0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkCommitJoinShape measures the commit of the bench's join shape
// at 30 days (README, Performance): each batch stores 71,500 rows of a
// join's layout (a side and store name, a block hash as a hex string, the
// index; a value of 126 bytes holding the hash and a miner again) and
// deletes the 71,500 the batch before stored, on 200 partitions of a lazy
// cache in memory, as the join's store is: the commit is the pending
// batch's sort and the data file. cpu-ms/op is the process's CPU during
// Commit (its goroutines included), delta-MB/op the data file's size.
func BenchmarkCommitJoinShape(b *testing.B) {
	const rows = 71_500
	ctx := context.Background()
	root := b.TempDir()
	s, err := Open(ctx, Options{Dir: filepath.Join(root, "ckpt", "state", "0"), FS: vfs.Default,
		LocalDir: filepath.Join(root, "cache"), Partitions: 200, Schema: testSchema,
		LazyCache: true, MemCacheBytes: 64 << 20, SnapshotEvery: 1 << 20}, -1)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(3, 4))
	batch := func() ([][]byte, [][]byte) {
		keys, vals := make([][]byte, rows), make([][]byte, rows)
		for i := range keys {
			hash := fmt.Sprintf("0x%016x%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64())
			k := AppendStringKey(AppendStringKey(AppendStringKey(nil, []string{"left", "right"}[i%2]), "keyWithIndexToValue"), hash)
			keys[i] = AppendNullableInt64Key(k, 0, false)
			v := append([]byte{2, 0, 0}, AppendInt64Value(nil, r.Int64N(20_000_000))...)
			v = AppendStringValue(v, hash)
			v = AppendInt64Value(v, 1_700_000_000_000_000+r.Int64N(1<<40))
			v = AppendStringValue(v, fmt.Sprintf("0x%040x", r.Uint64()))
			vals[i] = AppendStringValue(nil, string(v))
		}
		return keys, vals
	}
	var prev [][]byte
	var m measure
	var bytes int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		keys, vals := batch()
		for _, k := range prev {
			if err := s.DeleteKnown(k, true); err != nil {
				b.Fatal(err)
			}
		}
		for j, k := range keys {
			if err := s.PutKnown(k, vals[j], false); err != nil {
				b.Fatal(err)
			}
		}
		prev = keys
		b.StartTimer()
		m.start()
		met, err := s.Commit(ctx, int64(i))
		m.stop()
		if err != nil {
			b.Fatal(err)
		}
		bytes += met.BytesWritten
	}
	m.report(b, 2*rows)
	b.ReportMetric(float64(bytes)/float64(m.ops)/1e6, "delta-MB/op")
}
