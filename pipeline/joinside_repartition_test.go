package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/sparkref"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// sideCase is a left outer join with a deduplication on each relation
// (a.k, a.ts; b.id within the watermark): three stateful operators, the
// join 0, the left deduplication 1, the right one 2 (Spark's ids).
func sideCase() sparkref.JoinCase {
	c := sparkref.GenJoin(rand.New(rand.NewPCG(3, 41)), "LEFT OUTER JOIN", false)
	c.Dedup = [2]*sparkref.Dedup{{Columns: []string{"k", "ts"}}, {Columns: []string{"id"}, WithinWatermark: true}}
	return c
}

// sideRun runs round n of c on the checkpoint under root with the state
// partition count parts, returning the stateOperators of its last batch.
func sideRun(t *testing.T, c sparkref.JoinCase, root string, n, parts int) []stream.OperatorProgress {
	t.Helper()
	writeJoinRound(t, root, n, c.Rounds[n])
	var ops []stream.OperatorProgress
	cfg := sideConfig(c, root, parts)
	cfg.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
		if len(p.StateOperators) > 0 {
			ops = p.StateOperators
		}
	})}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatalf("round %d: %v", n, err)
	}
	return ops
}

func sideConfig(c sparkref.JoinCase, root string, parts int) Config {
	spec := func(rel string) SourceSpec {
		return SourceSpec{Name: rel, Format: "parquet", URI: "file://" + filepath.ToSlash(filepath.Join(root, rel)) + "?maxFilesPerTrigger=1&schema=" +
			url.QueryEscape("k STRING, ts TIMESTAMP, id BIGINT")}
	}
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
		Sources: []SourceSpec{spec("lhs"), spec("rhs")}, Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		OutputMode: "append", Query: c.SQL(),
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "200",
			"spark.sql.streaming.stateStore.partitions": strconv.Itoa(parts)}}
	cfg.DropDuplicates, cfg.DropDuplicatesWithinWatermark = c.DedupFlags()
	return cfg
}

// lastCommit is the newest batch id of the checkpoint's commit log.
func lastCommit(t *testing.T, ckpt string) int64 {
	t.Helper()
	names, err := os.ReadDir(filepath.Join(ckpt, "commits"))
	if err != nil {
		t.Fatal(err)
	}
	last := int64(-1)
	for _, n := range names {
		if id, err := strconv.ParseInt(n.Name(), 10, 64); err == nil {
			last = max(last, id)
		}
	}
	return last
}

// stateRows is every stored row of operators 0..n-1 at version v, read
// from the files (state.EachRow), as "op:key:value" hex, sorted: a
// repartition moves rows between partitions and files, never changes one.
func stateRows(t *testing.T, ckpt string, n int, v int64) []string {
	t.Helper()
	var rows []string
	for op := range n {
		err := state.EachRow(context.Background(), vfs.Default, filepath.Join(ckpt, "state", strconv.Itoa(op)), v, func(_ int, k, val []byte) error {
			h := sha256.Sum256(append(append([]byte(strconv.Itoa(len(k))+":"), k...), val...))
			rows = append(rows, strconv.Itoa(op)+":"+hex.EncodeToString(h[:8]))
			return nil
		})
		if err != nil {
			t.Fatalf("operator %d at version %d: %v", op, v, err)
		}
	}
	slices.Sort(rows)
	return rows
}

// sideJoinRows is the Delta table's rows, rendered as the oracle's.
func sideJoinRows(t *testing.T, root string) []string {
	t.Helper()
	tb, err := delta.Open(context.Background(), filepath.Join(root, "table"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := snap.Rows(context.Background(), func(row map[string]any) error {
		got = append(got, renderJoinRow(row))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

// TestJoinSideDedupRepartition: a checkpoint holding a left outer join's
// state and a deduplication's on each relation, on 200 state partitions
// (Spark's default), repartitions to 8 offline (engine.RepartitionOffline
// with state.Recorded: `checkpoint repartition`, no query definition) and
// online (a restart with spark.sql.streaming.stateStore.partitions=8),
// each keeping every stored row of the three operators (state.EachRow,
// row for row); `state dump --op N` shows each operator's rows; and the
// query resumes on either to the oracle's answer.
func TestJoinSideDedupRepartition(t *testing.T) {
	c := sideCase()
	half := len(c.Rounds) / 2
	for _, offline := range []bool{true, false} {
		t.Run(fmt.Sprintf("offline=%v", offline), func(t *testing.T) {
			root := t.TempDir()
			ckpt := filepath.Join(root, "ckpt")
			var progs []stream.OperatorProgress
			for n := range half {
				progs = sideRun(t, c, root, n, 200)
			}
			var names []string
			for _, p := range progs {
				names = append(names, p.OperatorName)
			}
			if want := []string{"symmetricHashJoin", "dedupe", "dedupeWithinWatermark"}; !slices.Equal(names, want) {
				t.Fatalf("stateOperators %v, want Spark's names by id: %v", names, want)
			}
			v := lastCommit(t, ckpt)
			before := stateRows(t, ckpt, 3, v)
			for op, want := range []string{"side,store,", "k,ts,", "id,"} {
				var b bytes.Buffer
				if _, err := state.Dump(context.Background(), state.DumpOptions{FS: vfs.Default, Checkpoint: ckpt, Operator: op, Batch: -1}, &b); err != nil {
					t.Fatalf("state dump --op %d: %v", op, err)
				}
				if !strings.HasPrefix(b.String(), want) || strings.Count(b.String(), "\n") < 2 {
					t.Fatalf("state dump --op %d: want a header starting %q and rows:\n%s", op, want, b.String())
				}
			}
			if len(before) < 20 {
				t.Fatalf("%d stored rows: too few for the test to mean anything", len(before))
			}
			var after []string
			if offline {
				res, err := engine.RepartitionOffline(context.Background(), engine.Options{CheckpointDir: ckpt, LocalDir: filepath.Join(root, "local")}, state.Recorded{}, 8)
				if err != nil {
					t.Fatal(err)
				}
				if n := int64(len(before)); res.Operators != 3 || res.Stats.From != 200 || res.Stats.To != 8 || res.Stats.KeysBefore != n || res.Stats.KeysAfter != n {
					t.Fatalf("offline repartition %+v, want 3 operators, 200 -> 8, %d keys", res, n)
				}
				after = stateRows(t, ckpt, 3, lastCommit(t, ckpt))
			} else {
				// The restart's control batch (v+1) rewrites every
				// operator's state on 8 partitions before the data batch.
				sideRun(t, c, root, half, 8)
				after = stateRows(t, ckpt, 3, v+1)
			}
			if !slices.Equal(after, before) {
				t.Fatalf("rows after the repartition: %d, before %d: missing %v, extra %v", len(after), len(before),
					head(multisetDiff(before, after)), head(multisetDiff(after, before)))
			}
			start := half
			if !offline {
				start = half + 1
			}
			for n := start; n < len(c.Rounds); n++ {
				sideRun(t, c, root, n, 8)
			}
			sameJoinRows(t, "resumed on 8 partitions", sideJoinRows(t, root), c.Oracle())
		})
	}
}
