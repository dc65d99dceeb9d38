package agg

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// TestAvgOfDecimalOutOfRange: avg of a DECIMAL(38,0) is DECIMAL(38,4),
// which cannot hold the average of values near 10^37: the batch fails with
// ARITHMETIC_OVERFLOW naming the aggregate (the old output panicked, "an
// average larger than its sum"; found by TestSparkRef's DECIMAL(38,0)
// column), while an average that fits is exact.
func TestAvgOfDecimalOutOfRange(t *testing.T) {
	ctx := context.Background()
	typ := stream.DecimalOf(38, 0)
	huge, _ := stream.ParseDecimal("60000000000000000000000000000000000002", 38, 0)
	for _, c := range []struct {
		vals []stream.Dec128
		code string
	}{
		{[]stream.Dec128{huge}, CodeArithmeticOverflow},
		{[]stream.Dec128{stream.Dec128Of(1), stream.Dec128Of(2)}, ""},
	} {
		op, err := New(Spec{Aggregates: []Aggregate{{Kind: Avg, Column: "d", As: "a"}}, ColumnTypes: map[string]stream.Type{"d": typ}})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		env := stream.OperatorEnv{StateDir: filepath.Join(dir, "s"), FS: vfs.Default, LocalDir: filepath.Join(dir, "l"), Partitions: 1, Version: -1,
			Logger: slog.New(slog.DiscardHandler)}
		if err := op.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		b := &stream.Batch{Len: len(c.vals), Columns: []stream.Column{{Name: "d", Type: typ, Decimals: c.vals}}}
		if err := op.Process(ctx, 0, 0, b); err != nil {
			t.Fatal(err)
		}
		out, _, err := op.Finish(ctx, 0, 0)
		if errcode.Code(err) != c.code {
			t.Fatalf("%v: %v, want %q", c.vals, err, c.code)
		}
		if c.code == "" {
			if got := out.Column("a").Decimals[0].Text(4); got != "1.5000" {
				t.Fatalf("avg %s, want 1.5000", got)
			}
		}
		op.Close()
	}
}
