package flow_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/stream"
)

// BenchmarkJoinBatches: a left outer join of two sources, 5 batches of
// 2,000 rows per side over 500 keys, each batch a minute later (the
// watermark evicts as it goes); reports input rows per second.
func BenchmarkJoinBatches(b *testing.B) { benchJoin(b, jQuery) }

// BenchmarkJoinSideDedupBatches is BenchmarkJoinBatches with a
// deduplication by id on each side (jDedupIDQuery): two more stateful
// operators the rows pass before the join (every id is new, so all do).
func BenchmarkJoinSideDedupBatches(b *testing.B) { benchJoin(b, jDedupIDQuery) }

func benchJoin(b *testing.B, query func(join.Type, stream.Source, stream.Source, stream.Sink, int) *flow.Query) {
	const perSide, batches, keys = 2000, 5, 500
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		l, r := jSource("left"), jSource("right")
		var lr, rr []jrow
		base := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
		for n := range batches {
			for i := range perSide {
				ts := base + int64(n)*60e6 + int64(i%60)*1e6
				lr = append(lr, jrow{k: "k" + strconv.Itoa(i%keys), ts: ts, id: int64(i)})
				rr = append(rr, jrow{k: "k" + strconv.Itoa((i*7)%keys), ts: ts + 30e6, id: int64(i)})
			}
		}
		_ = l.Append(jBatch(lr))
		_ = r.Append(jBatch(rr))
		l.MaxRows, r.MaxRows = perSide, perSide
		sink := streamtest.NewSink()
		b.StartTimer()
		_, err := query(join.LeftOuter, l, r, sink, 4).Run(context.Background(),
			engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(2*perSide*batches*b.N)/b.Elapsed().Seconds(), "rows/s")
}
