package pipeline

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/sparkref"
	"github.com/ethstream/ethstream/stream"
)

// TestSparkRefQuietTrigger runs TestSparkRef's generated queries (each
// with its deduplication or projection) in two runs of one checkpoint,
// split at a random batch: the first run ends with a quiet trigger (no
// source has new data), where Spark runs a no-data batch whenever an
// operator's input watermark moved past the one it last ran with
// (StateStoreSaveExec, StreamingDeduplicateExec and
// SessionWindowStateStoreSaveExec's shouldRunAnotherBatch), whether or
// not it evicts anything; the second run's first batch then drops late
// input by that batch's watermark. The oracle sees the quiet trigger as a
// batch without rows (a no-op when the watermark did not move). A row
// between the two watermarks that arrives after the quiet trigger is kept
// by an engine that skips the batch and dropped by Spark: the test counts
// the queries where the quiet trigger changes the oracle's answer and
// fails if none did.
func TestSparkRefQuietTrigger(t *testing.T) {
	schema := sparkrefSchema(t)
	gen := &sparkref.Gen{Schema: schema, EventTime: ethblock.ColBlockTS, Source: "s", SourceCol: stream.ColSource,
		T0: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	oschema := append(slices.Clone(schema), sparkref.Column{Name: stream.ColSource, Type: stream.String})
	n := max(*sparkrefN/2, 1)
	var runs, mattered, failing, failed int
	for i := range n {
		seed := *sparkrefSeed + uint64(i)
		rng := rand.New(rand.NewPCG(seed, 26))
		q := gen.Query(rng)
		batches := gen.Batches(rng, 2+rng.IntN(7))
		if drng := rand.New(rand.NewPCG(seed, 41)); drng.IntN(5) == 0 {
			q = gen.Projection(drng)
		} else {
			gen.Dedup(drng, q)
		}
		gen.ZeroDelay(rand.New(rand.NewPCG(seed, 0)), q)
		k := 1 + rand.New(rand.NewPCG(seed, 57)).IntN(len(batches)-1)
		obatches := make([][]sparkref.Row, len(batches))
		for b, rows := range batches {
			for _, r := range rows {
				obatches[b] = append(obatches[b], append(slices.Clone(r), "s"))
			}
		}
		quiet := slices.Concat(obatches[:k], [][]sparkref.Row{nil}, obatches[k:])
		want := sparkref.Evaluate(q, oschema, quiet)
		if want.Fail != nil {
			// The batch that fails is numbered by whether the quiet
			// trigger ran one; TestSparkRef checks the failures.
			failing++
			continue
		}
		runs++
		if skipped := sparkref.Evaluate(q, oschema, obatches); skipped.Fail != nil || diffResults(want, skipped) {
			mattered++
		}
		sink, err := runSparkRefRuns(t, q, schema, batches, k, len(batches))
		if d := diffSparkRef(want, sink, err); d != "" {
			failed++
			dups, within := q.Flags()
			t.Errorf("seed %d, runs of batches [0, %d) and [%d, %d): %s\n  --with-watermark %q --output-mode %s ansi=%v --drop-duplicates %q --drop-duplicates-within-watermark %q\n%s",
				seed, k, k, len(batches), q.Render(), q.WatermarkOption(), q.Mode, q.ANSI, dups, within, d)
			if failed >= 10 {
				t.Fatal("stopping after 10 failures")
			}
		}
	}
	t.Logf("%d queries run in two runs (%d expected to fail a batch, not run): the quiet trigger between them changed the oracle's answer in %d", runs, failing, mattered)
	if runs >= 50 && mattered == 0 {
		t.Errorf("no query's answer depended on the quiet trigger's no-data batch: the test proves nothing of it")
	}
}

// diffResults reports whether two oracle answers differ in their rows.
func diffResults(a, b sparkref.Result) bool {
	if len(a.Rows) != len(b.Rows) {
		return true
	}
	for i := range a.Rows {
		if a.Rows[i].Key != b.Rows[i].Key || len(a.Rows[i].Values) != len(b.Rows[i].Values) {
			return true
		}
		for j := range a.Rows[i].Values {
			if !sameValue(a.Rows[i].Values[j], b.Rows[i].Values[j]) {
				return true
			}
		}
	}
	return false
}
