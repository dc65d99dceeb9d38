package join

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// TestPrunedColumns: a join whose sides name the columns the query reads
// (Side.Columns) stores and emits only those and its own (keys, watermark,
// range columns), and its rows are the unpruned join's rows restricted to
// those columns, under the same names, for each join type; a state the
// unpruned join wrote (a checkpoint from before pruning) keeps its layout
// when the pruned join restarts on it, and the rows are the same again.
func TestPrunedColumns(t *testing.T) {
	for _, typ := range []Type{Inner, LeftOuter, RightOuter, FullOuter, LeftSemi} {
		t.Run(typ.String(), func(t *testing.T) {
			batches := memTestInput(rand.New(rand.NewPCG(uint64(typ), 11)), 6)
			// The left side reads v as well; the right side only what
			// the join needs.
			cols := [2][]string{{"v"}, {}}
			wide := pruneSpec(typ, [2][]string{nil, nil})
			narrow := pruneSpec(typ, cols)

			o, err := New(narrow)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range o.OutputSchema().Fields {
				names = append(names, f.Name)
			}
			// a_v: both sides have v, whether the right one is pruned or not.
			wantNames := []string{"a_k", "a_ts", "a_v"}
			if typ != LeftSemi {
				wantNames = append(wantNames, "b_k", "b_ts")
			} else {
				wantNames = []string{"k", "ts", "v"}
			}
			if !slices.Equal(names, wantNames) {
				t.Fatalf("pruned rows carry %v, want %v", names, wantNames)
			}
			if _, ok := o.OutputColumn(stream.LeftSide, "d"); ok {
				t.Fatal("OutputColumn names the pruned column a.d")
			}

			want := runPrune(t, []Spec{wide}, batches, t.TempDir(), names)
			got := runPrune(t, []Spec{narrow}, batches, t.TempDir(), names)
			if got.out != want.out {
				t.Fatalf("pruned rows differ from the unpruned join's:\n%s\nwant:\n%s", got.out, want.out)
			}
			for i, fs := range got.stored {
				if len(fs) != len(pruned(memTestSchema, mustKept(t, narrow, i)).Fields) {
					t.Fatalf("side %d stores %v", i, fs)
				}
			}
			// Restart: batches 0-2 unpruned, 3-4 pruned on the same state.
			mixed := runPrune(t, []Spec{wide, wide, wide, narrow, narrow}, batches, t.TempDir(), names)
			if mixed.out != want.out {
				t.Fatalf("pruned restart on an unpruned state differs:\n%s\nwant:\n%s", mixed.out, want.out)
			}
			if !slices.Equal(fieldNames(mixed.stored[0]), fieldNames(memTestSchema.Fields)) {
				t.Fatalf("the unpruned state's layout changed on a pruned restart: left side stores %v", mixed.stored[0])
			}
			// A restart reading fewer columns than a pruned state stores
			// keeps that state's layout; its rows leave out a.v.
			narrower := pruneSpec(typ, [2][]string{{}, {}})
			fewer := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "a_v" || n == "v" })
			wantFewer := runPrune(t, []Spec{wide}, batches, t.TempDir(), fewer)
			gotFewer := runPrune(t, []Spec{narrow, narrow, narrower}, batches, t.TempDir(), fewer)
			if gotFewer.out != wantFewer.out {
				t.Fatalf("a narrower restart on a pruned state differs:\n%s\nwant:\n%s", gotFewer.out, wantFewer.out)
			}
			if !slices.Equal(fieldNames(gotFewer.stored[0]), []string{"k", "ts", "v"}) {
				t.Fatalf("the pruned state's layout changed on a narrower restart: left side stores %v", gotFewer.stored[0])
			}
		})
	}
}

// TestPrunedStateLacksColumn: a restart whose query reads a column a
// pruned state does not store is STATE_SCHEMA_MISMATCH at Open, naming
// the column, and leaves the state directory as it was; the query as
// before still opens it.
func TestPrunedStateLacksColumn(t *testing.T) {
	for _, typ := range []Type{Inner, LeftOuter, FullOuter} {
		t.Run(typ.String(), func(t *testing.T) {
			batches := memTestInput(rand.New(rand.NewPCG(uint64(typ), 12)), 6)
			dir := t.TempDir()
			narrow := pruneSpec(typ, [2][]string{{"v"}, {}})
			runPrune(t, []Spec{narrow}, batches, dir, []string{"a_k"})
			before := dirDigest(t, dir)
			ctx := context.Background()
			env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local2"),
				Partitions: 3, Version: int64(len(batches)) - 1}
			for _, cols := range [][2][]string{{{"v", "d"}, {}}, {{"v"}, {"v"}}, {nil, {}}} {
				o, err := New(pruneSpec(typ, cols))
				if err != nil {
					t.Fatal(err)
				}
				err = o.Open(ctx, env)
				if !errcode.Is(err, errcode.StateSchemaMismatch) || !strings.Contains(err.Error(), "which the join's state does not store") {
					t.Fatalf("columns %v: Open on a state pruned to a.v: %v, want STATE_SCHEMA_MISMATCH naming the column", cols, err)
				}
				if after := dirDigest(t, dir); after != before {
					t.Fatalf("a refused Open changed the state:\n%s\nbefore:\n%s", after, before)
				}
			}
			o, err := New(narrow)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Open(ctx, env); err != nil {
				t.Fatal(err)
			}
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// dirDigest lists the files under dir/state with a hash of each.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(filepath.Join(dir, "state"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %x", p, sha256.Sum256(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func pruneSpec(typ Type, cols [2][]string) Spec {
	side := func(alias string, c []string) Side {
		return Side{Alias: alias, Schema: memTestSchema, Keys: []string{"k"}, Watermark: "ts", Delay: time.Minute, Columns: c}
	}
	return Spec{Type: typ, Left: side("a", cols[0]), Right: side("b", cols[1]), Range: []Bound{
		{LeftColumn: "ts", Op: GE, RightColumn: "ts", RightOffset: -time.Minute},
		{LeftColumn: "ts", Op: LE, RightColumn: "ts", RightOffset: time.Minute}}}
}

func mustKept(t *testing.T, s Spec, i int) map[string]bool {
	k, err := keptColumns([]Side{s.Left, s.Right}[i], i, s.Range)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func fieldNames(fs []stream.Field) []string {
	var n []string
	for _, f := range fs {
		n = append(n, f.Name)
	}
	return n
}

type pruneRun struct {
	out    string
	stored [2][]stream.Field
}

// runPrune runs batch i through an operator of specs[i] (the last spec
// for the batches after), opening a new operator on the same state
// whenever the spec changes, and renders each batch's rows by the columns
// names (sorted) and the no-data answers.
func runPrune(t *testing.T, specs []Spec, batches [][2][]memTestRow, dir string, names []string) pruneRun {
	t.Helper()
	ctx := context.Background()
	var out strings.Builder
	var o *Operator
	var cur int = -1
	maxTs, wmMs := int64(0), int64(0)
	for id, b := range batches {
		si := min(id, len(specs)-1)
		if si != cur {
			if o != nil {
				if err := o.Close(); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if o, err = New(specs[si]); err != nil {
				t.Fatal(err)
			}
			env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"),
				Partitions: 3, Version: int64(id) - 1}
			if err := o.Open(ctx, env); err != nil {
				t.Fatal(err)
			}
		}
		cur = si
		o.EvictionWatermark(int64(id), wmMs)
		for s := range 2 {
			if err := o.ProcessSide(ctx, int64(id), wmMs, s, memTestBatch(b[s])); err != nil {
				t.Fatal(err)
			}
		}
		res, _, err := o.Finish(ctx, int64(id), wmMs)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Commit(ctx, int64(id)); err != nil {
			t.Fatal(err)
		}
		var rows []string
		for i := range res.Len {
			var cells []string
			for _, n := range names {
				c := res.Column(n)
				switch {
				case c == nil:
					t.Fatalf("batch %d: the rows have no column %s: %v", id, n, res.Columns)
				case c.IsNull(i):
					cells = append(cells, "null")
				case c.Type.Storage() == stream.String:
					cells = append(cells, c.Strings[i])
				default:
					cells = append(cells, fmt.Sprint(c.Int64s[i]))
				}
			}
			rows = append(rows, strings.Join(cells, " "))
		}
		slices.Sort(rows)
		fmt.Fprintf(&out, "batch %d: %s\n", id, strings.Join(rows, "; "))
		for s := range 2 {
			for _, r := range b[s] {
				maxTs = max(maxTs, r.ts)
			}
		}
		wmMs = maxTs/1000 - 60_000
		need, err := o.NeedsNoDataBatch(wmMs)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "no-data batch at %d: %v\n", wmMs, need)
	}
	var r pruneRun
	r.out = out.String()
	if !strings.Contains(r.out, ";") {
		t.Fatalf("too few joined rows to test anything:\n%s", r.out)
	}
	sides, err := specSideFields(o.store.Schema().Spec)
	if err != nil {
		t.Fatal(err)
	}
	r.stored = sides
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = state.ReadAll(ctx, vfs.Default, filepath.Join(dir, "state"), -1, func(int, []any, []any) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return r
}
