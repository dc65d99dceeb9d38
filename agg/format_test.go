package agg

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestStateFormat1StillReads: state written in format 1 (every checkpoint
// before format 2: avg keeps a long sum, BIGINT keys are not nullable) is
// read by an operator of today's spec, which keeps format 1 for it, both
// when the caller picks the format from the recorded schema
// (ForRecordedState) and when only Open finds out; a new checkpoint gets
// format 2.
func TestStateFormat1StillReads(t *testing.T) {
	ctx := context.Background()
	spec := Spec{GroupBy: []string{"miner", "gas_used"}, Mode: Update,
		Aggregates:  []Aggregate{{Kind: Count, As: "n"}, {Kind: Avg, Column: "gas_used", As: "a"}},
		ColumnTypes: nullSpec.ColumnTypes}
	old := spec
	old.StateFormat = StateFormat1
	fs, dir := vfs.NewMem(), "/ck/state/0"
	env := func(version int64) stream.OperatorEnv {
		return stream.OperatorEnv{StateDir: dir, FS: fs, LocalDir: t.TempDir(), Partitions: 2, Version: version}
	}
	run := func(op *Operator, id int64, b *stream.Batch) string {
		t.Helper()
		out := streamtest.RunBatch(t, op, id, 0, b)
		c := out.Column("a")
		if c == nil || out.Len != 1 || c.IsNull(0) {
			t.Fatalf("batch %d output %+v", id, out)
		}
		return strconv.FormatFloat(c.Float64s[0], 'g', -1, 64)
	}
	op1, err := New(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := op1.Open(ctx, env(-1)); err != nil {
		t.Fatal(err)
	}
	run(op1, 0, minerBatch([]string{"0xaa"}, nil, []int64{4}, nil))
	recorded := op1.Schema().String()
	op1.Close()
	if !strings.Contains(recorded, "a int64") || strings.Contains(recorded, "nullable") {
		t.Fatalf("format 1 schema %s", recorded)
	}

	got, ok := ForRecordedState(spec, recorded)
	if !ok || got.StateFormat != StateFormat1 {
		t.Fatalf("ForRecordedState picked %d, %v", got.StateFormat, ok)
	}
	for name, s := range map[string]Spec{"ForRecordedState": got, "Open": spec} {
		op, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Open(ctx, env(0)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if op.Schema().String() != recorded {
			t.Errorf("%s: reads with %s", name, op.Schema())
		}
		// The stored long sum 4 (one row) and the new row 4: avg 4.
		if a := run(op, 1, minerBatch([]string{"0xaa"}, nil, []int64{4}, nil)); a != "4" {
			t.Errorf("%s: avg %s after the restart", name, a)
		}
		// Format 1 has no null BIGINT key.
		if err := op.Process(ctx, 2, 0, minerBatch([]string{"0xaa"}, nil, []int64{4}, []bool{false})); errcode.Code(err) != CodeNullGroupKey {
			t.Errorf("%s: a null key in format 1: %v", name, err)
		}
		op.Abort()
		op.Close()
	}

	fresh, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	if s := fresh.Schema().String(); !strings.Contains(s, "gas_used int64 nullable") || !strings.Contains(s, "a float64") {
		t.Errorf("format 2 schema %s", s)
	}
	if _, ok := ForRecordedState(spec, "something else"); ok {
		t.Error("ForRecordedState matched an unrelated schema")
	}
}
