package agg

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// TestDecodeValueMatchesState checks the operator's direct value decoder
// against state.DecodeValue, the reference reader of the format.
func TestDecodeValueMatchesState(t *testing.T) {
	spec := propertySpecs["sliding-all-aggs"]
	p, err := newPlan(spec)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	vals := make([]aggVal, len(p.aggs))
	got := make([]aggVal, len(p.aggs))
	for range 2000 {
		for a := range vals {
			vals[a] = aggVal{i: rng.Int64() - math.MaxInt64/2, f: rng.NormFloat64() * 1e12, nn: rng.Int64N(1 << 40)}
			if p.aggs[a].acc() == stream.Float64 {
				vals[a].i = 0
			} else {
				vals[a].f = 0
			}
			if !p.aggs[a].hasNonNull() {
				vals[a].nn = 0
			}
		}
		enc := p.encodeValue(nil, vals)
		fields, err := state.DecodeValue(p.schema.Value, enc)
		if err != nil {
			t.Fatal(err)
		}
		var want []any
		for a, ra := range p.aggs {
			if ra.acc() == stream.Float64 {
				want = append(want, vals[a].f)
			} else {
				want = append(want, vals[a].i)
			}
			if ra.hasNonNull() {
				want = append(want, vals[a].nn)
			}
		}
		if fmt.Sprint(fields) != fmt.Sprint(want) {
			t.Fatalf("state decodes %v, want %v", fields, want)
		}
		if err := p.decodeValue(enc, got); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(vals) {
			t.Fatalf("decodeValue = %v, want %v", got, vals)
		}
		for cut := 0; cut < len(enc); cut++ {
			if err := p.decodeValue(enc[:cut], got); err == nil {
				t.Fatalf("decodeValue of %d of %d bytes: no error", cut, len(enc))
			}
		}
		if err := p.decodeValue(append(enc, 0), got); err == nil {
			t.Fatal("decodeValue with a trailing byte: no error")
		}
	}
}

func TestFloatLess(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		a, b float64
		want bool
	}{
		{1, 2, true}, {2, 1, false}, {1, nan, true}, {nan, 1, false}, {nan, nan, false}, {math.Inf(1), nan, true},
	} {
		if got := floatLess(c.a, c.b); got != c.want {
			t.Errorf("floatLess(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestProcessRejectsBadInput: the spec's columns are checked against each
// chunk, with coded errors, and a failed batch is aborted cleanly.
func TestProcessRejectsBadInput(t *testing.T) {
	h := newHarness(t, refSpec(), vfs.NewMem(), 2)
	ctx := context.Background()
	good := makeBatch([]testRow{{source: "s", miner: "m", ts: 1_793_491_200_000_000}})
	drop := func(name string) *stream.Batch {
		b := makeBatch([]testRow{{source: "s", miner: "m", ts: 1_793_491_200_000_000}})
		for i := range b.Columns {
			if b.Columns[i].Name == name {
				b.Columns = append(b.Columns[:i], b.Columns[i+1:]...)
				break
			}
		}
		return b
	}
	retype := makeBatch([]testRow{{source: "s", miner: "m", ts: 1}})
	retype.Columns[0].Type = stream.Int64 // block_ts as a plain int64
	short := makeBatch([]testRow{{source: "s", miner: "m", ts: 1}})
	short.Len = 2
	for _, c := range []struct {
		name string
		b    *stream.Batch
		code string
	}{
		{"missing miner", drop(ethblock.ColMiner), CodeUnresolvedColumn},
		{"missing event time", drop(ethblock.ColBlockTS), CodeUnresolvedColumn},
		{"event time type", retype, CodeDatatypeMismatch},
		// A null String group key is a group now, as in Spark; a null
		// Int64 key is still NULL_GROUP_KEY (nulls_test.go).
		{"short column", short, errcode.InvalidArgument},
	} {
		if err := h.op.Process(ctx, 0, 0, good); err != nil {
			t.Fatal(err)
		}
		err := h.op.Process(ctx, 0, 0, c.b)
		if errcode.Code(err) != c.code {
			t.Fatalf("%s: %v, want code %s", c.name, err, c.code)
		}
		h.op.Abort()
	}
	out, _ := h.finishCommit(0, [][]testRow{{{source: "s", miner: "m", ts: 1_793_491_200_000_000}}})
	if out.Len != 0 {
		t.Fatalf("aborted attempts leaked %d rows", out.Len)
	}
	if got := h.stateRows(); len(got) != 0 {
		t.Fatalf("aborted attempts left state %v", got)
	}
}

// TestLifecycleMisuse: engine bugs are reported, not silently accepted.
func TestLifecycleMisuse(t *testing.T) {
	ctx := context.Background()
	op, err := New(refSpec())
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Process(ctx, 0, 0, makeBatch(nil)); err == nil {
		t.Fatal("Process before Open: no error")
	}
	if needs, err := op.NeedsNoDataBatch(math.MaxInt64 / 1000); needs || err != nil {
		t.Fatalf("NeedsNoDataBatch before Open = %v, %v", needs, err)
	}
	h := newHarness(t, refSpec(), vfs.NewMem(), 1)
	if err := h.op.Commit(ctx, 0); err == nil {
		t.Fatal("Commit before Finish: no error")
	}
	if _, _, err := h.op.Finish(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.op.Finish(ctx, 0, 0); err == nil {
		t.Fatal("second Finish: no error")
	}
	if err := h.op.Process(ctx, 1, 0, makeBatch(nil)); err == nil {
		t.Fatal("batch 1 while batch 0 is uncommitted: no error")
	}
	if _, err := h.op.Repartition(ctx, 0, 1, 2); err == nil {
		t.Fatal("Repartition during a batch: no error")
	}
	if err := h.op.Open(ctx, h.env()); err == nil {
		t.Fatal("second Open: no error")
	}
	if err := h.op.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// TestRepartition: the operator delegates to the store and keeps working
// with the new partition count after a restart.
func TestRepartition(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, refSpec(), vfs.NewMem(), 5)
	var rows []testRow
	for i := range 200 {
		rows = append(rows, testRow{source: "s3_backfill", miner: fmt.Sprintf("0x%02x", i%7), ts: 1_793_491_200_000_000 + int64(i)*12_000_000})
	}
	h.process(0, [][]testRow{rows})
	h.finishCommit(0, [][]testRow{rows})
	before := h.stateRows()
	st, err := h.op.Repartition(ctx, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if st.From != 5 || st.To != 2 {
		t.Fatalf("repartition stats %+v", st)
	}
	h.committed, h.parts = 1, 2
	if got := h.stateRows(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("state after repartition differs:\n%v\n%v", got, before)
	}
	h.restart(true)
	more := []testRow{{source: "s3_backfill", miner: "0x00", ts: 1_793_491_200_000_000}}
	h.process(2, [][]testRow{more})
	out, prog := h.finishCommit(2, [][]testRow{more})
	if prog.NumShufflePartitions != 2 || prog.NumStateStoreInstances != 2 {
		t.Fatalf("progress after repartition %+v", prog)
	}
	// Blocks 0, 7, 14 and 21 of the first window went to 0x00, plus this one.
	if got := decodeOutput(t, h.op.p, out); len(got) != 1 || got[0].vals[0] != "5" {
		t.Fatalf("output after repartition %v, want count 5", got)
	}
}

// TestProcessAllocations: once the batch's keys exist, folding more rows
// into them allocates nothing (the reference query's steady state).
func TestProcessAllocations(t *testing.T) {
	h := newHarness(t, refSpec(), vfs.NewMem(), 1)
	rows := benchRows(4096, 0)
	b := makeBatch(rows)
	ctx := context.Background()
	if err := h.op.Process(ctx, 0, 0, b); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := h.op.Process(ctx, 0, 0, b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Process allocates %v times per chunk of %d rows", allocs, len(rows))
	}
	h.op.Abort()
}

// benchRows generates n blocks of the reference workload: 12 s slots from
// start (µs), a few builders dominating (about 6 distinct per 5 minutes), one
// source, interned strings as sources produce them.
func benchRows(n int, startUs int64) []testRow {
	const t0 = int64(1_793_491_200_000_000)
	rng := rand.New(rand.NewPCG(7, 8))
	miners := make([]string, 40)
	for i := range miners { // random 20-byte addresses, as real fee recipients
		miners[i] = fmt.Sprintf("0x%016x%016x%08x", rng.Uint64(), rng.Uint64(), rng.Uint32())
	}
	rows := make([]testRow, n)
	for i := range rows {
		// Skewed: builders 0-3 take most slots, the long tail the rest.
		m := rng.IntN(4)
		if rng.IntN(10) == 0 {
			m = 4 + rng.IntN(len(miners)-4)
		}
		rows[i] = testRow{source: "s3_backfill", miner: miners[m], ts: t0 + startUs + int64(i)*12*int64(time.Second/time.Microsecond)}
	}
	return rows
}

// FuzzDecodeValue: state bytes are disk input; decoding them never panics
// and accepts exactly what state.DecodeValue accepts.
func FuzzDecodeValue(f *testing.F) {
	p, err := newPlan(propertySpecs["sliding-all-aggs"])
	if err != nil {
		f.Fatal(err)
	}
	vals := make([]aggVal, len(p.aggs))
	f.Add(p.encodeValue(nil, vals))
	vals[0].i, vals[1].nn, vals[5].f = 300, 1<<40, -2.5
	f.Add(p.encodeValue(nil, vals))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := make([]aggVal, len(p.aggs))
		err := p.decodeValue(b, got)
		_, serr := state.DecodeValue(p.schema.Value, b)
		if (err == nil) != (serr == nil) {
			t.Fatalf("decodeValue error %v, state.DecodeValue error %v", err, serr)
		}
	})
}
