package agg

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// testRow is one input row of the tests. Columns: source, miner (String),
// block_ts (Timestamp), gas_used (Int64), shard (Int64), fee (Float64).
type testRow struct {
	source, miner string
	ts            int64
	tsNull        bool
	gas           int64
	gasNull       bool
	shard         int64
	fee           float64
	feeNull       bool
}

// testColumnTypes declares the non-block test columns.
var testColumnTypes = map[string]stream.Type{"shard": stream.Int64, "fee": stream.Float64,
	ethblock.ColNumber: stream.Int64, ethblock.ColHash: stream.String, ethblock.ColParentHash: stream.String,
	ethblock.ColBlockTS: stream.Timestamp, ethblock.ColMiner: stream.String,
	ethblock.ColTransactionCount: stream.Int64, ethblock.ColGasUsed: stream.Int64}

// makeBatch builds a columnar batch of rows; nullable columns get a Valid
// slice only when they hold a null, as sources do.
func makeBatch(rows []testRow) *stream.Batch {
	n := len(rows)
	src := stream.Column{Name: stream.ColSource, Type: stream.String, Strings: make([]string, n)}
	miner := stream.Column{Name: ethblock.ColMiner, Type: stream.String, Strings: make([]string, n)}
	ts := stream.Column{Name: ethblock.ColBlockTS, Type: stream.Timestamp, Int64s: make([]int64, n)}
	gas := stream.Column{Name: ethblock.ColGasUsed, Type: stream.Int64, Int64s: make([]int64, n)}
	shard := stream.Column{Name: "shard", Type: stream.Int64, Int64s: make([]int64, n)}
	fee := stream.Column{Name: "fee", Type: stream.Float64, Float64s: make([]float64, n)}
	valid := func(c *stream.Column, i int, null bool) {
		if null && c.Valid == nil {
			c.Valid = make([]bool, n)
			for j := range c.Valid {
				c.Valid[j] = true
			}
		}
		if c.Valid != nil {
			c.Valid[i] = !null
		}
	}
	for i, r := range rows {
		src.Strings[i], miner.Strings[i] = r.source, r.miner
		ts.Int64s[i], gas.Int64s[i], shard.Int64s[i], fee.Float64s[i] = r.ts, r.gas, r.shard, r.fee
		valid(&ts, i, r.tsNull)
		valid(&gas, i, r.gasNull)
		valid(&fee, i, r.feeNull)
	}
	return &stream.Batch{Len: n, Columns: []stream.Column{ts, src, miner, gas, shard, fee}}
}

// harness plays the engine around one Operator: it computes the watermark as
// the engine does (max event time seen minus the delay, at the end of a batch,
// for the next), runs batches, commits, restarts and crashes.
type harness struct {
	t         testing.TB
	spec      Spec
	fs        vfs.FS
	stateDir  string
	localDir  string
	parts     int
	op        *Operator
	committed int64 // last committed batch id, -1 for none
	wmMs      int64 // watermark of the next batch
	// prevWmMs is the watermark of the batch before the next, by which
	// Process drops late input (Spark 3.4+'s rule, the engine's).
	prevWmMs int64
	// restarted says the operator was reopened since the last commit (so
	// it lost what the committed version closed at commit: doc.go).
	restarted bool
	maxEvent  int64 // max event time seen (µs), MinInt64 for none
	// lookahead: tell the operator the next batch's watermark before
	// Finish, as the engine does (stream.WatermarkLookahead).
	lookahead bool
	// shards, if set, is the number of partials the operator folds chunks
	// into (shard.go) in place of shardsFor's choice.
	shards int
}

func newHarness(t testing.TB, spec Spec, fs vfs.FS, parts int) *harness {
	return newHarnessAt(t, spec, fs, fs.PathJoin(t.TempDir(), "ckpt", "state", "0"), parts)
}

// newHarnessAt is newHarness with the state in stateDir.
func newHarnessAt(t testing.TB, spec Spec, fs vfs.FS, stateDir string, parts int) *harness {
	h := &harness{t: t, spec: spec, fs: fs, parts: parts, committed: -1, maxEvent: math.MinInt64}
	h.stateDir = stateDir
	if err := fs.MkdirAll(h.stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.localDir = t.TempDir()
	h.open()
	return h
}

func (h *harness) env() stream.OperatorEnv {
	return stream.OperatorEnv{StateDir: h.stateDir, FS: h.fs, LocalDir: h.localDir,
		Partitions: h.parts, Version: h.committed, Logger: slog.New(slog.DiscardHandler)}
}

func (h *harness) open() {
	h.t.Helper()
	op, err := New(h.spec)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.shards > 0 {
		op.setPlan(op.p, h.shards)
	}
	if err := op.Open(context.Background(), h.env()); err != nil {
		h.t.Fatal(err)
	}
	h.op = op
}

// restart closes the operator and opens a new one at the committed version,
// with an empty local cache directory when fresh is set (as on a new machine).
func (h *harness) restart(fresh bool) {
	h.t.Helper()
	if err := h.op.Close(); err != nil {
		h.t.Fatal(err)
	}
	if fresh {
		h.localDir = h.t.TempDir()
	}
	h.open()
	h.restarted = true
}

// process feeds chunks of batch id at the previous batch's watermark, as
// the engine does.
func (h *harness) process(id int64, chunks [][]testRow) {
	h.t.Helper()
	for _, c := range chunks {
		if err := h.op.Process(context.Background(), id, h.prevWmMs, makeBatch(c)); err != nil {
			h.t.Fatalf("batch %d: process: %v", id, err)
		}
	}
}

// nextWm returns the watermark of the batch after one that reads chunks,
// and the max event time seen then.
func (h *harness) nextWm(chunks [][]testRow) (wmMs, maxEvent int64) {
	wmMs, maxEvent = h.wmMs, h.maxEvent
	for _, c := range chunks {
		for _, r := range c {
			if !r.tsNull && r.ts > maxEvent {
				maxEvent = r.ts
			}
		}
	}
	if maxEvent != math.MinInt64 && h.spec.hasWatermark() {
		wmMs = max(wmMs, floorDiv(maxEvent, 1000)-h.spec.WatermarkDelay.Milliseconds())
	}
	return wmMs, maxEvent
}

// finish ends batch id (telling the operator the next watermark first when
// lookahead is set) and returns what Finish returned.
func (h *harness) finish(id int64, chunks [][]testRow) (*stream.Batch, error) {
	if h.lookahead {
		next, _ := h.nextWm(chunks)
		h.op.NextWatermark(id, next)
	}
	out, _, err := h.op.Finish(context.Background(), id, h.wmMs)
	return out, err
}

// finishCommit ends batch id and commits it, then advances the watermark.
func (h *harness) finishCommit(id int64, chunks [][]testRow) (*stream.Batch, stream.OperatorProgress) {
	h.t.Helper()
	out, prog, err := h.finishCommitErr(id, chunks)
	if err != nil {
		h.t.Fatal(err)
	}
	return out, prog
}

// finishCommitErr is finishCommit returning the error of Finish or Commit.
func (h *harness) finishCommitErr(id int64, chunks [][]testRow) (*stream.Batch, stream.OperatorProgress, error) {
	out, err := h.finish(id, chunks)
	if err != nil {
		return nil, stream.OperatorProgress{}, fmt.Errorf("batch %d: finish: %w", id, err)
	}
	if err := h.op.Commit(context.Background(), id); err != nil {
		return nil, stream.OperatorProgress{}, fmt.Errorf("batch %d: commit: %w", id, err)
	}
	h.committed, h.restarted = id, false
	h.prevWmMs = h.wmMs
	h.wmMs, h.maxEvent = h.nextWm(chunks)
	return out, h.op.Progress(), nil
}

// stateRows reads the committed state through the store's offline reader and
// renders each row as "key -> value".
func (h *harness) stateRows() []string {
	h.t.Helper()
	var rows []string
	_, err := state.ReadAll(context.Background(), h.fs, h.stateDir, h.committed, func(_ int, key, val []any) error {
		rows = append(rows, fmt.Sprint(key)+" -> "+fmt.Sprint(val))
		return nil
	})
	if err != nil {
		h.t.Fatalf("read state: %v", err)
	}
	sort.Strings(rows)
	return rows
}

// outRow is one output row, split into its key (window + groups) and values.
type outRow struct {
	key  string
	end  int64 // window end, 0 without a window
	vals []string
}

// decodeOutput renders an output batch as rows: the key is "start|end|g1|g2"
// and values are formatted per aggregate ("null" for nulls).
func decodeOutput(t testing.TB, p *plan, b *stream.Batch) []outRow {
	t.Helper()
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	var want []string
	if p.window {
		want = append(want, ColWindowStart, ColWindowEnd)
	}
	want = append(want, p.spec.GroupBy...)
	for _, a := range p.aggs {
		want = append(want, a.As)
	}
	if len(b.Columns) != len(want) {
		t.Fatalf("output has %d columns, want %v", len(b.Columns), want)
	}
	for i := range b.Columns {
		if b.Columns[i].Name != want[i] {
			t.Fatalf("output column %d is %q, want %q", i, b.Columns[i].Name, want[i])
		}
	}
	rows := make([]outRow, b.Len)
	nk := len(want) - len(p.aggs)
	for i := 0; i < b.Len; i++ {
		var parts []string
		for c := 0; c < nk; c++ {
			parts = append(parts, streamtest.Value(&b.Columns[c], i))
		}
		rows[i].key = strings.Join(parts, "|")
		if p.window {
			rows[i].end = b.Columns[1].Int64s[i]
		}
		for c := nk; c < len(want); c++ {
			rows[i].vals = append(rows[i].vals, streamtest.Value(&b.Columns[c], i))
		}
	}
	return rows
}
