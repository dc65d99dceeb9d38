package limit

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

var input = stream.Schema{Fields: []stream.Field{{Name: "n", Type: stream.Int64}, {Name: "d", Type: stream.DecimalOf(20, 2), Nullable: true}}}

func chunk(from, to int64) *stream.Batch {
	b := &stream.Batch{Len: int(to - from), Columns: []stream.Column{{Name: "d", Type: stream.DecimalOf(20, 2)}, {Name: "n", Type: stream.Int64}}}
	for i := from; i < to; i++ {
		b.Columns[0].Decimals = append(b.Columns[0].Decimals, stream.Dec128Of(i*100))
		b.Columns[1].Int64s = append(b.Columns[1].Int64s, i)
	}
	return b
}

// TestCountAcrossBatchesAbortAndRestart: the first N rows over the stream,
// an aborted batch's rows not counted, the count restored from state on a
// reopen, and nothing after N (the brute force: rows 0..N-1 in order).
func TestCountAcrossBatchesAbortAndRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state", "0"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"), Partitions: 3, Version: -1}
	var got []int64
	open := func() *Operator {
		op, err := New(Spec{N: 7, Input: input})
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		return op
	}
	op := open()
	run := func(b int64, commit bool, chunks ...*stream.Batch) {
		for _, c := range chunks {
			if err := op.Process(ctx, b, 0, c); err != nil {
				t.Fatal(err)
			}
		}
		out, prog, err := op.Finish(ctx, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if prog.OperatorName != OperatorName || out.Column("d") == nil {
			t.Fatalf("progress %+v, columns %v", prog, out.Columns)
		}
		if !commit {
			op.Abort()
			return
		}
		got = append(got, out.Column("n").Int64s...)
		if err := op.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
		env.Version = b
	}
	run(0, true, chunk(0, 2), chunk(2, 4))
	run(1, false, chunk(4, 6)) // aborted: its rows are read again
	run(1, true, chunk(4, 6))
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	op = open()
	run(2, true, chunk(6, 9))
	run(3, true, chunk(9, 12))
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 1, 2, 3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("emitted %v, want %v", got, want)
	}
}

func TestRefusals(t *testing.T) {
	if _, err := New(Spec{N: -1, Input: input}); errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("negative limit: %v", err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	op, _ := New(Spec{N: 3, Input: input})
	if err := op.Open(ctx, stream.OperatorEnv{StateDir: filepath.Join(dir, "s"), FS: vfs.Default, LocalDir: filepath.Join(dir, "l"), Partitions: 1, Version: -1}); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	b := chunk(0, 2)
	b.Signs = []int8{1, -1}
	if err := op.Process(ctx, 0, 0, b); errcode.Code(err) != CodeRetractionUnsupported {
		t.Fatalf("retraction: %v", err)
	}
}
