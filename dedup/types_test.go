package dedup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/stream"
)

// TestEveryKeyType: dropDuplicates over a column of each scalar type
// (with nulls, which are values) keeps the first row of each value, as a
// brute-force scan of the rendered values says, over two batches and a
// restart; the state schema records the narrow kinds as before they
// existed.
func TestEveryKeyType(t *testing.T) {
	ctx := context.Background()
	types := []stream.Type{stream.Boolean, stream.Int8, stream.Int16, stream.Int32, stream.Date, stream.TimestampNTZ,
		stream.Binary, stream.DecimalOf(9, 2), stream.DecimalOf(38, 0), stream.Float32}
	for _, typ := range types {
		t.Run(typ.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(typ)))
			schema := stream.Schema{Fields: []stream.Field{{Name: "v", Type: typ, Nullable: true}, {Name: "row", Type: stream.Int64}}}
			op, err := New(Spec{Input: schema, Columns: []string{"v"}})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			var want, got []int64
			dir := t.TempDir()
			env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state", "0"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"), Partitions: 2, Version: -1}
			row := int64(0)
			for b := range int64(2) {
				if err := op.Open(ctx, env); err != nil {
					t.Fatal(err)
				}
				in := &stream.Batch{Len: 200, Columns: []stream.Column{{Name: "v", Type: typ, Valid: make([]bool, 200)}, {Name: "row", Type: stream.Int64}}}
				c := &in.Columns[0]
				for i := range 200 {
					x := rng.Int64N(12) - 6
					null := typ.Kind() != stream.Float32 && x == -6 // a null double key is refused
					c.Valid[i] = !null
					switch typ.Storage() {
					case stream.Int64:
						if typ == stream.Boolean {
							x = x & 1
						}
						c.Int64s = append(c.Int64s, x)
					case stream.Float64:
						c.Float64s = append(c.Float64s, float64(x)/4)
					case stream.String:
						c.Strings = append(c.Strings, fmt.Sprintf("\x00%d", x))
					case stream.Decimal:
						c.Decimals = append(c.Decimals, stream.Dec128Of(x*1_000_000_007))
					}
					in.Columns[1].Int64s = append(in.Columns[1].Int64s, row)
					k := "null"
					if !null {
						k = fmt.Sprint(x)
						if typ.Storage() == stream.Float64 {
							k = fmt.Sprint(float64(x) / 4)
						}
					}
					if !seen[k] {
						seen[k] = true
						want = append(want, row)
					}
					row++
				}
				out := processCommit(t, op, b, in)
				got = append(got, out.Column("row").Int64s...)
				if err := op.Close(); err != nil {
					t.Fatal(err)
				}
				env.Version = b
				op, _ = New(Spec{Input: schema, Columns: []string{"v"}})
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("kept rows %v, want %v", got, want)
			}
		})
	}
	op, err := New(Spec{Input: stream.Schema{Fields: []stream.Field{{Name: "a", Type: stream.Int32}, {Name: "b", Type: stream.Float32}, {Name: "c", Type: stream.TimestampNTZ}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := op.Schema().String(), "dedupe key(a int64 nullable, b float64, c timestamp nullable) value() spec(format=1)"; got != want {
		t.Errorf("schema %s, want %s", got, want)
	}
	if _, err := New(Spec{Input: stream.Schema{Fields: []stream.Field{{Name: "a", Type: stream.ArrayOf(stream.Int64)}}}}); err == nil {
		t.Error("an array key was accepted")
	}
}
