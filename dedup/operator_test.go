package dedup

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

var input = stream.Schema{Fields: []stream.Field{
	{Name: "ts", Type: stream.Timestamp, Nullable: true},
	{Name: "k", Type: stream.String, Nullable: true},
	{Name: "n", Type: stream.Int64, Nullable: true},
}}

func TestSpecRefusals(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Input: input, WithinWatermark: true, Columns: []string{"k"}}, "without a watermark"},
		{Spec{Input: input, Columns: []string{"nope"}}, `column "nope"`},
		{Spec{Input: input, Columns: []string{"k"}, WatermarkColumn: "n"}, "not a timestamp"},
	} {
		_, err := New(c.spec)
		if errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want INVALID_ARGUMENT %q", c.spec, err, c.want)
		}
	}
}

// TestStateSchema: the key is the columns in order (duplicates once), the
// value none or expiresAtMicros; no columns means every input column.
func TestStateSchema(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Input: input, Columns: []string{"k", "n", "k"}}, "dedupe key(k string, n int64 nullable) value() spec(format=1)"},
		{Spec{Input: input}, "dedupe key(ts timestamp nullable, k string, n int64 nullable) value() spec(format=1)"},
		{Spec{Input: input, Columns: []string{"k"}, WatermarkColumn: "ts", WatermarkDelay: time.Second, WithinWatermark: true},
			"dedupeWithinWatermark key(k string) value(expiresAtMicros timestamp) spec(format=1)"},
	} {
		op, err := New(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := op.Schema().String(); got != c.want {
			t.Errorf("%+v: schema %s, want %s", c.spec, got, c.want)
		}
	}
}

// TestNullsAreValues: rows with a null in the same key column are
// duplicates of each other, not of a non-null row; a null event time is
// never late.
func TestNullsAreValues(t *testing.T) {
	ctx := context.Background()
	op := openTwoPartitions(t, Spec{Input: input, Columns: []string{"k", "n"}, WatermarkColumn: "ts", WatermarkDelay: time.Minute})
	in := &stream.Batch{Len: 6, Columns: []stream.Column{
		{Name: "ts", Type: stream.Timestamp, Int64s: []int64{0, 5e6, 6e6, 7e6, 8e6, 9e6}, Valid: []bool{false, true, true, true, true, true}},
		{Name: "k", Type: stream.String, Strings: []string{"", "", "a", "", "a", ""}, Valid: []bool{false, false, true, true, true, false}},
		{Name: "n", Type: stream.Int64, Int64s: []int64{0, 0, 1, 0, 1, 2}, Valid: []bool{false, false, true, false, true, true}},
	}}
	// Watermark 1 ms: the null event time is not late, 5e6 µs is not.
	if err := op.Process(ctx, 0, 1, in); err != nil {
		t.Fatal(err)
	}
	out, prog, err := op.Finish(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Kept: (null,null), (a,1), ("",null), (null,2); dropped: rows 1 and 4.
	if got := out.Column("ts").Int64s; !slices.Equal(got, []int64{0, 6e6, 7e6, 9e6}) || out.Len != 4 {
		t.Fatalf("emitted ts %v (%d rows)", got, out.Len)
	}
	if v := out.Column("k").Valid; !slices.Equal(v, []bool{false, true, true, false}) {
		t.Fatalf("k validity %v", v)
	}
	if prog.CustomMetrics[MetricDroppedDuplicates] != 2 || prog.NumRowsDroppedByWatermark != 0 || prog.OperatorName != OperatorName {
		t.Fatalf("progress %+v", prog)
	}
	if err := op.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareCommit: a version PrepareCommit wrote is loaded only once
// Commit published it; after an Abort (the sink failed) the next Open
// loads the version before, so the aborted batch's keys are new again.
func TestPrepareCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(version int64) *Operator {
		op, err := New(Spec{Input: input, Columns: []string{"k"}})
		if err != nil {
			t.Fatal(err)
		}
		env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state", "0"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"),
			Partitions: 2, Version: version}
		if err := op.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		return op
	}
	keys := func(ks ...string) *stream.Batch {
		b := &stream.Batch{Len: len(ks), Columns: []stream.Column{{Name: "ts", Type: stream.Timestamp, Int64s: make([]int64, len(ks))},
			{Name: "k", Type: stream.String, Strings: ks}, {Name: "n", Type: stream.Int64, Int64s: make([]int64, len(ks))}}}
		return b
	}
	// run processes batch id and returns how many rows it emitted.
	run := func(op *Operator, id int64, ks ...string) int {
		if err := op.Process(ctx, id, 0, keys(ks...)); err != nil {
			t.Fatal(err)
		}
		out, _, err := op.Finish(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		return out.Len
	}
	op := open(-1)
	if n := run(op, 0, "a", "b"); n != 2 {
		t.Fatalf("batch 0 emitted %d rows", n)
	}
	if err := op.Commit(ctx, 0); err != nil { // without PrepareCommit, as before
		t.Fatal(err)
	}
	if n := run(op, 1, "c", "a"); n != 1 {
		t.Fatalf("batch 1 emitted %d rows, want 1 (a is a duplicate)", n)
	}
	if err := op.PrepareCommit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	op.Abort() // the sink failed
	op.Close()
	op = open(0)
	if n := run(op, 1, "c", "a"); n != 1 {
		t.Fatalf("batch 1 re-run after the abort emitted %d rows, want 1 (c is new again)", n)
	}
	if err := op.PrepareCommit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := op.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	op.Close()
	op = open(1)
	defer op.Close()
	if n := run(op, 2, "a", "b", "c", "d"); n != 1 {
		t.Fatalf("batch 2 emitted %d rows, want 1 (only d is new)", n)
	}
}

// TestKeptRowsShareStateKeys: the emitted rows of a one-String-column
// deduplication hold their key strings in the state's copy of the key
// (the input's strings are not kept) where that copy holds them verbatim,
// and the values are the input's (an escaped byte, an empty string, a
// null), and stay so after the batch's commit and the next batch.
func TestKeptRowsShareStateKeys(t *testing.T) {
	op := openTwoPartitions(t, Spec{Input: input, Columns: []string{"k"}})
	batch := func(id int64, ks []string, valid []bool) *stream.Batch {
		in := &stream.Batch{Len: len(ks), Columns: []stream.Column{
			{Name: "ts", Type: stream.Timestamp, Int64s: make([]int64, len(ks))},
			{Name: "k", Type: stream.String, Strings: ks, Valid: valid},
			{Name: "n", Type: stream.Int64, Int64s: make([]int64, len(ks))},
		}}
		return processCommit(t, op, id, in)
	}
	// Built at run time, so that no two rows share a literal's bytes.
	mk := func(s string) string { return strings.Clone(s) }
	ks := []string{mk("0xaa"), mk("b\x00c"), "", "", mk("0xaa"), mk("0xdd")}
	in0 := slices.Clone(ks)
	out := batch(0, ks, []bool{true, true, false, true, true, true})
	want := []string{"0xaa", "b\x00c", "", "", "0xdd"}
	check := func(when string) {
		t.Helper()
		if got := out.Column("k").Strings; !slices.Equal(got, want) || out.Len != 5 {
			t.Fatalf("%s: emitted k %q (%d rows), want %q", when, got, out.Len, want)
		}
		if v := out.Column("k").Valid; !slices.Equal(v, []bool{true, true, false, true, true}) {
			t.Fatalf("%s: k validity %v", when, v)
		}
	}
	check("after the batch")
	for _, c := range []struct{ out, in int }{{0, 0}, {4, 5}} {
		if unsafe.StringData(out.Column("k").Strings[c.out]) == unsafe.StringData(in0[c.in]) {
			t.Errorf("emitted row %d holds the input's string %q, not the state's copy", c.out, in0[c.in])
		}
	}
	// The escaped key's state copy is not its bytes: the input's string.
	if unsafe.StringData(out.Column("k").Strings[1]) != unsafe.StringData(in0[1]) {
		t.Error("the escaped key's row does not hold the input's string")
	}
	if next := batch(1, []string{mk("0xaa"), mk("0xee")}, nil); next.Len != 1 || next.Column("k").Strings[0] != "0xee" {
		t.Fatalf("second batch emitted %q", next.Column("k").Strings)
	}
	check("after the next batch")
}

// openTwoPartitions opens a deduplication of spec on a new state directory
// of two partitions; the test's end closes it.
func openTwoPartitions(t *testing.T, spec Spec) *Operator {
	t.Helper()
	op, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state", "0"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"), Partitions: 2, Version: -1}
	if err := op.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Close() })
	return op
}

// processCommit runs batch id of in through op at watermark 0 and returns
// what it emitted.
func processCommit(t *testing.T, op *Operator, id int64, in *stream.Batch) *stream.Batch {
	return streamtest.RunBatch(t, op, id, 0, in)
}

// TestOutputRoomForLastBatch: a batch's output columns start with room for
// the rows the last batch emitted, and hold only this batch's rows.
func TestOutputRoomForLastBatch(t *testing.T) {
	op := openTwoPartitions(t, Spec{Input: input, Columns: []string{"k"}})
	batch := func(keys ...string) *stream.Batch {
		b := &stream.Batch{Len: len(keys), Columns: []stream.Column{
			{Name: "ts", Type: stream.Timestamp}, {Name: "k", Type: stream.String, Strings: keys}, {Name: "n", Type: stream.Int64}}}
		for i := range keys {
			b.Columns[0].Int64s = append(b.Columns[0].Int64s, int64(i))
			b.Columns[2].Int64s = append(b.Columns[2].Int64s, int64(10*i))
		}
		return b
	}
	if out := processCommit(t, op, 0, batch("a", "b", "a", "c", "d")); out.Len != 4 {
		t.Fatalf("batch 0 emitted %d rows, want 4", out.Len)
	}
	if err := op.Process(t.Context(), 1, 0, batch()); err != nil {
		t.Fatal(err)
	}
	for _, c := range op.out.Columns {
		if n, room := c.Len(), max(cap(c.Int64s), cap(c.Strings)); n != 0 || room < 4 {
			t.Fatalf("batch 1's column %s before its rows: %d rows, room for %d; want 0 and 4", c.Name, n, room)
		}
	}
	out := processCommit(t, op, 1, batch("c", "e", "f"))
	if got := out.Columns[1].Strings; !slices.Equal(got, []string{"e", "f"}) || out.Len != 2 || len(out.Columns[0].Int64s) != 2 ||
		!slices.Equal(out.Columns[2].Int64s, []int64{10, 20}) {
		t.Fatalf("batch 1 emitted %d rows: k %q, ts %v, n %v; want e, f", out.Len, got, out.Columns[0].Int64s, out.Columns[2].Int64s)
	}
}
