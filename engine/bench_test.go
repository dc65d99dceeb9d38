package engine

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// nopOp is a stateless operator: it isolates the engine loop's own cost.
type nopOp struct{ rows int64 }

func (o *nopOp) Open(context.Context, stream.OperatorEnv) error { return nil }
func (o *nopOp) Process(_ context.Context, _, _ int64, in *stream.Batch) error {
	o.rows += int64(in.Len)
	return nil
}
func (o *nopOp) Finish(context.Context, int64, int64) (*stream.Batch, stream.OperatorProgress, error) {
	return &stream.Batch{}, stream.OperatorProgress{OperatorName: "nop"}, nil
}
func (o *nopOp) Commit(context.Context, int64) error  { return nil }
func (o *nopOp) Abort()                               {}
func (o *nopOp) NeedsNoDataBatch(int64) (bool, error) { return false, nil }
func (o *nopOp) Repartition(context.Context, int64, int64, int) (stream.RepartitionStats, error) {
	return stream.RepartitionStats{}, nil
}
func (o *nopOp) Close() error { return nil }

// BenchmarkBatchOverhead measures the loop's own cost per batch on a real
// disk: LatestOffset, offsets/N (temp + fsync + link + dir fsync), a 20-row
// read, commits/N (same), source commit, progress event appended and fsynced.
// Run: go test -run XXX -bench BatchOverhead -benchtime 200x ./engine
func BenchmarkBatchOverhead(b *testing.B) {
	b.Run("disk", func(b *testing.B) { benchLoop(b, vfs.Default, b.TempDir()) })
	// In memory: the loop's CPU cost without fsync latency.
	b.Run("mem", func(b *testing.B) { benchLoop(b, vfs.NewMem(), "/ckpt") })
}

func benchLoop(b *testing.B, fs vfs.FS, dir string) {
	w := &srcWorld{start: 1, available: 0, max: 20, grow: 20}
	q := Query{
		Columns:  []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource},
		Sources:  []NamedSource{{Name: "eth_live", Source: &memSource{w: w, name: "eth_live"}}},
		Operator: &nopOp{}, Sink: streamtest.Plain(streamtest.NewSink()),
		Trigger: Trigger{Kind: ProcessingTime}, MaxDataBatches: b.N,
		Conf: map[string]string{checkpoint.ConfSourceEvolution: "true", checkpoint.ConfMinBatchesToRetain: "100"},
	}
	b.ResetTimer()
	sum, err := Run(context.Background(), q, Options{CheckpointDir: dir, FS: fs})
	if err != nil {
		b.Fatal(err)
	}
	if sum.DataBatches != b.N {
		b.Fatalf("ran %d batches, want %d", sum.DataBatches, b.N)
	}
}

// TestRunOnDisk runs the engine on a real directory: new query, restart with
// an added source, a concurrent second start refused, inspect.
func TestRunOnDisk(t *testing.T) {
	dir := t.TempDir() + "/ckpt"
	s := newScenario()
	s.sources["a"] = &srcWorld{start: 1, available: 50, max: 20}
	s.sources["b"] = &srcWorld{start: 1, available: 5}
	mk := func(names ...string) Query {
		q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: &countOp{}, Sink: streamtest.Plain(s.table),
			Trigger: Trigger{Kind: AvailableNow}, Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"}}
		for _, n := range names {
			q.Sources = append(q.Sources, NamedSource{n, &memSource{w: s.sources[n], name: n}})
		}
		return q
	}
	o := Options{CheckpointDir: dir, FS: vfs.Default, Clock: s.clock}
	sum, err := Run(context.Background(), mk("a"), o)
	if err != nil || sum.DataBatches != 3 {
		t.Fatalf("first run: %+v %v", sum, err)
	}
	// Hold the lock as another query would.
	w, err := checkpoint.Lock(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), mk("a", "b"), o); !errcode.Is(err, errcode.CheckpointLocked) {
		t.Fatalf("second query: %v", err)
	}
	w.Close()
	sum2, err := Run(context.Background(), mk("a", "b"), o)
	if err != nil || sum2.QueryID != sum.QueryID || sum2.RunID == sum.RunID || sum2.FirstBatchID != 3 {
		t.Fatalf("restart: %+v %v", sum2, err)
	}
	rep, err := Inspect(vfs.Default, dir)
	if err != nil || *rep.LatestBatchID != 3 || len(rep.Sources) != 2 {
		t.Fatalf("inspect: %+v %v", rep, err)
	}
	s.fs = nil
}
