package engine

import (
	"context"
	"testing"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// recyclingOp is an operator whose Finish output the engine hands back
// (stream.OutputRecycler): Recycle records the batch and scribbles over
// it, as an operator reusing its memory would, so that a sink or engine
// still reading it would write wrong rows.
type recyclingOp struct {
	stream.Operator
	sink     *watchedSink
	last     *stream.Batch // the last Finish's output
	recycled []*stream.Batch
	bad      []string
}

func (o *recyclingOp) Finish(ctx context.Context, batchID, wm int64) (*stream.Batch, stream.OperatorProgress, error) {
	out, prog, err := o.Operator.Finish(ctx, batchID, wm)
	o.last = out
	return out, prog, err
}

func (o *recyclingOp) Recycle(out *stream.Batch) {
	switch {
	case out != o.last:
		o.bad = append(o.bad, "handed back a batch the last Finish did not return")
	case o.sink.in:
		o.bad = append(o.bad, "handed back while the sink's AddBatch runs")
	case o.sink.got != out:
		o.bad = append(o.bad, "handed back a batch the sink was not given")
	}
	o.recycled = append(o.recycled, out)
	for i := range out.Columns {
		c := &out.Columns[i]
		for j := range c.Strings {
			c.Strings[j] = "scribbled"
		}
		for j := range c.Int64s {
			c.Int64s[j] = -1
		}
	}
}

// watchedSink tells whether its AddBatch is running, and which batch it
// was given last.
type watchedSink struct {
	stream.Sink
	in  bool
	got *stream.Batch
}

func (s *watchedSink) AddBatch(ctx context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	s.in, s.got = true, out
	defer func() { s.in = false }()
	return s.Sink.AddBatch(ctx, id, out)
}

// TestRecycleOutput: the engine hands the batch an operator's Finish
// returned back to it (stream.OutputRecycler) once the sink's AddBatch
// returned, every batch, with the state commit alongside the sink or after
// it; the operator may overwrite it then and the table stays the recount.
func TestRecycleOutput(t *testing.T) {
	for _, prep := range []bool{false, true} {
		name := map[bool]string{false: "commit-after-sink", true: "prepare-alongside-sink"}[prep]
		t.Run(name, func(t *testing.T) {
			s := newScenario()
			s.sources["eth_live"] = &srcWorld{start: 100, available: 160, max: 15}
			sink := &watchedSink{Sink: streamtest.Plain(s.table)}
			var inner stream.Operator = &countOp{}
			if prep {
				inner = newPrepOp()
			}
			op := &recyclingOp{Operator: inner, sink: sink}
			q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource},
				Sources:  []NamedSource{{Name: "eth_live", Source: &memSource{w: s.sources["eth_live"], name: "eth_live"}}},
				Operator: op, Sink: sink, Trigger: Trigger{Kind: AvailableNow},
				Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"}}
			if prep {
				q.Operator = &preparingRecycler{op}
			}
			res, err := Run(context.Background(), q, Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock})
			if err != nil {
				t.Fatal(err)
			}
			if len(op.bad) > 0 {
				t.Fatal(op.bad)
			}
			if n := res.DataBatches + res.NoDataBatches; res.DataBatches < 2 || len(op.recycled) != n {
				t.Fatalf("%d batches handed back, %d run (%d with data)", len(op.recycled), n, res.DataBatches)
			}
			if po, ok := inner.(*prepOp); ok && po.prepares == 0 {
				t.Fatal("the state was never prepared alongside the sink")
			}
			if got := s.verifyTable(); got[:3] != "ok:" {
				t.Fatal(got)
			}
		})
	}
}

// preparingRecycler is recyclingOp over a prepOp, exposing its
// PrepareCommit (stream.CommitPreparer) so that the engine commits state
// alongside the sink.
type preparingRecycler struct{ *recyclingOp }

func (p *preparingRecycler) PrepareCommit(ctx context.Context, batchID int64) error {
	return p.Operator.(*prepOp).PrepareCommit(ctx, batchID)
}
