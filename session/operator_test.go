package session

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

func openTest(t *testing.T, spec Spec) *Operator {
	t.Helper()
	op, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"), Partitions: 3, Version: -1}
	if err := op.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Close() })
	return op
}

// TestRetractionRefused: a retraction fails the batch with
// RETRACTION_UNSUPPORTED naming the operator, before anything is merged.
func TestRetractionRefused(t *testing.T) {
	op := openTest(t, Spec{Column: "ts", Gap: time.Minute, GroupBy: []string{"k"}, Aggregates: testAggs, Mode: agg.Complete, ColumnTypes: testTypes})
	in := toBatch([]oRow{{ts: 1e9, gap: 1, v: 1}, {ts: 2e9, gap: 1, v: 2}})
	in.Signs = []int8{1, -1}
	err := op.Process(context.Background(), 0, 0, in)
	if errcode.Code(err) != CodeRetractionUnsupported || !strings.Contains(err.Error(), OperatorName) {
		t.Fatalf("got %v", err)
	}
	op.Abort()
	out, _, err := op.Finish(context.Background(), 0, 0)
	if err != nil || out.Len != 0 {
		t.Fatalf("after the refusal: %v, %d rows", err, out.Len)
	}
}

// TestLateRowBridges: a row arriving after two sessions of its key were
// stored, between them, merges them into one (the later one's state row
// is deleted); a row whose own session ends at the watermark is late.
func TestLateRowBridges(t *testing.T) {
	ctx := context.Background()
	spec := Spec{Column: "ts", Gap: 10 * time.Second, GroupBy: []string{"k"}, Aggregates: testAggs, Mode: agg.Append,
		WatermarkDelay: time.Hour, ColumnTypes: testTypes}
	op := openTest(t, spec)
	a := "a"
	batch := func(id, wmMs int64, rows ...oRow) (*stream.Batch, stream.OperatorProgress) {
		t.Helper()
		for i := range rows {
			rows[i].k = &a
		}
		if err := op.Process(ctx, id, wmMs, toBatch(rows)); err != nil {
			t.Fatal(err)
		}
		out, prog, err := op.Finish(ctx, id, wmMs)
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
		return out, prog
	}
	_, p := batch(0, 0, oRow{ts: 100e6, v: 1}, oRow{ts: 125e6, v: 2})
	if p.NumRowsTotal != 2 || p.NumRowsUpdated != 2 {
		t.Fatalf("two sessions stored: %+v", p)
	}
	// [110, 120) starts at [100, 110)'s end (start <= end merges), and
	// [115, 125) ends at [125, 135)'s start: together they bridge the two.
	_, p = batch(1, 0, oRow{ts: 110e6, v: 3}, oRow{ts: 115e6, v: 4})
	if p.NumRowsTotal != 1 || p.NumRowsRemoved != 1 || p.NumRowsUpdated != 1 {
		t.Fatalf("the late rows should bridge the sessions into one: %+v", p)
	}
	// Watermark 200 s: the merged session [100, 135) is emitted; a row at
	// 190 s (its session ends at 200 s) is late.
	out, p := batch(2, 200_000, oRow{ts: 190e6, v: 5})
	if out.Len != 1 || out.Column(ColStart).Int64s[0] != 100e6 || out.Column(ColEnd).Int64s[0] != 135e6 ||
		out.Column("count").Int64s[0] != 4 || out.Column("sum").Int64s[0] != 10 || p.NumRowsDroppedByWatermark != 1 {
		t.Fatalf("emitted %+v, progress %+v", out, p)
	}
	// Spark's shouldRunAnotherBatch in append mode: a batch runs once the
	// watermark moved, though nothing is left to evict.
	if need, err := op.NeedsNoDataBatch(1 << 40); err != nil || !need {
		t.Fatalf("append mode, nothing left to evict: %v %v", need, err)
	}
}

// TestAppendReadsNoState: in append mode a batch reads nothing from the
// store (the index holds the stored values), so its Pebble cache is never
// built: sessions merged across batches, bridged and evicted leave no file
// under LocalDir (on the disk, through LocalFS, where a built cache lives).
func TestAppendReadsNoState(t *testing.T) {
	ctx := context.Background()
	spec := Spec{Column: "ts", Gap: 10 * time.Second, GroupBy: []string{"k"}, Aggregates: testAggs, Mode: agg.Append,
		WatermarkDelay: time.Hour, ColumnTypes: testTypes}
	op, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	local := filepath.Join(dir, "local")
	env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state"), FS: vfs.Default, LocalDir: local, LocalFS: vfs.Default,
		Partitions: 3, Version: -1}
	if err := op.Open(ctx, env); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	keys := []string{"a", "b", "c", "d"}
	batch := func(id, wmMs int64, ts ...int64) *stream.Batch {
		t.Helper()
		var rows []oRow
		for i, x := range ts {
			rows = append(rows, oRow{ts: x, k: &keys[i%len(keys)], v: int64(i)})
		}
		out := streamtest.RunBatch(t, op, id, wmMs, toBatch(rows))
		err := filepath.WalkDir(local, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("batch %d: %s under LocalDir: the batch built the state cache", id, path)
				return filepath.SkipAll
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	batch(0, 0, 100e6, 100e6, 100e6, 100e6, 125e6, 125e6, 125e6, 125e6)
	// Rows that extend and bridge every key's stored sessions.
	batch(1, 0, 110e6, 110e6, 110e6, 110e6, 115e6, 115e6, 115e6, 115e6)
	if out := batch(2, 200_000); out.Len != len(keys) || out.Column("count").Int64s[0] != 4 {
		t.Fatalf("evicted %d sessions (%v), want one of 4 rows per key", out.Len, out.Column("count").Int64s)
	}
}
