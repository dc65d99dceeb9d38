package state

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ethstream/ethstream/internal/cputime"
)

var scale10M = flag.Bool("state.10m", false, "BenchmarkScale also runs at 10M keys (minutes, several GB of disk)")

// BenchmarkScale measures the three bulk operations of a state store at 1M
// keys (and 10M with -state.10m), each on 200 partitions over the real disk,
// so that a regression in commit, eviction or repartition shows:
//
//	go test ./state -run '^$' -bench Scale -benchtime 1x
//	go test ./state -run '^$' -bench Scale -benchtime 1x -state.10m
//
// commit: a batch of n new keys (a backfill batch: puts only, keys in new
// windows) put and committed over a state of n keys. evict: a batch that
// scans the oldest half of a state of n keys and deletes it (the
// aggregation's eviction, Scan(nil, upper) + Delete), then commits.
// repartition: the n keys from 200 partitions into 8. Each reports the
// operation's ms and CPU-ms per op (user+system of the process; Pebble's
// background work included) and bytes allocated per key.
func BenchmarkScale(b *testing.B) {
	sizes := []int{1_000_000}
	if *scale10M {
		sizes = append(sizes, 10_000_000)
	}
	ctx := context.Background()
	for _, n := range sizes {
		b.Run(fmt.Sprintf("commit/keys=%d", n), func(b *testing.B) {
			s, _ := benchStore(b, 200)
			defer s.Close()
			fillRange(b, s, 0, n)
			var m measure
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				lo := n * (i + 1)
				keys := benchKeyRange(lo, lo+n)
				m.start()
				for j, k := range keys {
					if err := s.Put(k, testVal(int64(j))); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := s.Commit(ctx, s.Version()+1); err != nil {
					b.Fatal(err)
				}
				m.stop()
			}
			m.report(b, n)
		})
		b.Run(fmt.Sprintf("evict/keys=%d", n), func(b *testing.B) {
			s, _ := benchStore(b, 200)
			defer s.Close()
			var m measure
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				lo := n * i
				fillRange(b, s, lo, lo+n) // the store is empty after each round
				upper := testKey(lo + n/2)
				b.StartTimer()
				m.start()
				evicted := 0
				err := s.Scan(nil, upper, func(key, _ []byte) error {
					evicted++
					return s.Delete(key)
				})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Commit(ctx, s.Version()+1); err != nil {
					b.Fatal(err)
				}
				m.stop()
				if want := n / 2; evicted < want-7 || evicted > want+7 {
					b.Fatalf("evicted %d keys, want about %d", evicted, want)
				}
				// Empty the rest for the next round, untimed.
				b.StopTimer()
				if err := s.Scan(nil, nil, func(key, _ []byte) error { return s.Delete(key) }); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Commit(ctx, s.Version()+1); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			m.report(b, n/2)
		})
		b.Run(fmt.Sprintf("repartition/keys=%d/200to8", n), func(b *testing.B) {
			s, _ := benchStore(b, 200)
			defer s.Close()
			fillRange(b, s, 0, n)
			v := s.Version()
			var m measure
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
				m.start()
				st, err := s.Repartition(ctx, v, v+1, 8)
				if err != nil {
					b.Fatal(err)
				}
				m.stop()
				v++
				if st.KeysAfter != int64(n) {
					b.Fatalf("keys after %d", st.KeysAfter)
				}
			}
			m.report(b, n)
		})
	}
}

// benchKeyRange returns testKey(lo) .. testKey(hi-1).
func benchKeyRange(lo, hi int) [][]byte {
	ks := make([][]byte, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ks = append(ks, testKey(i))
	}
	return ks
}

// fillRange puts keys lo..hi-1 in batches of 1M, committing each as the
// next version.
func fillRange(b *testing.B, s *Store, lo, hi int) {
	b.Helper()
	for start := lo; start < hi; start += 1_000_000 {
		for i := start; i < min(start+1_000_000, hi); i++ {
			if err := s.Put(testKey(i), testVal(int64(i))); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.Commit(context.Background(), s.Version()+1); err != nil {
			b.Fatal(err)
		}
	}
}

// measure accumulates wall time, CPU time and allocations of the timed
// sections.
type measure struct {
	wall, cpu  time.Duration
	allocBytes uint64
	t0         time.Time
	c0         time.Duration
	a0         uint64
	ops        int
}

func (m *measure) start() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.a0 = ms.TotalAlloc
	m.t0, m.c0 = time.Now(), cputime.Self()
}

func (m *measure) stop() {
	m.wall += time.Since(m.t0)
	m.cpu += cputime.Self() - m.c0
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.allocBytes += ms.TotalAlloc - m.a0
	m.ops++
}

func (m *measure) report(b *testing.B, keysPerOp int) {
	if m.ops == 0 {
		return
	}
	b.ReportMetric(float64(m.wall.Microseconds())/1000/float64(m.ops), "ms/op")
	b.ReportMetric(float64(m.cpu.Microseconds())/1000/float64(m.ops), "cpu-ms/op")
	b.ReportMetric(float64(m.allocBytes)/float64(m.ops)/float64(keysPerOp), "B/key")
}
