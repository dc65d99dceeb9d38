package pipeline

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/duckref"
	"github.com/ethstream/ethstream/internal/sparkref"
	"github.com/ethstream/ethstream/stream"
)

var sparkrefSessionN = flag.Int("sparkref.session.n", 300, "generated session window queries TestSparkRefSession runs")

// TestSparkRefSession is TestSparkRef for session windows: generated
// GROUP BY session_window(block_ts, gap), keys queries (a constant gap in
// Spark's spellings or a CASE of gap strings, some zero or negative, or
// none; append, complete, and update which is refused) over batches with
// nulls, out-of-order and late rows, run through ethstream and evaluated by
// internal/sparkref's session oracle (written from Spark's
// SessionWindowing, MergingSessionsIterator and the session state store
// execs, not from package session); the final tables must agree. A failure
// prints its seed: -sparkref.seed=S -sparkref.session.n=1 reruns it.
func TestSparkRefSession(t *testing.T) {
	schema := sparkrefSchema(t)
	gen := &sparkref.Gen{Schema: schema, EventTime: ethblock.ColBlockTS, Source: "s", SourceCol: stream.ColSource,
		T0: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	bin := duckref.Optional(t)
	var duck *json.Encoder
	duckFile, ducks := filepath.Join(t.TempDir(), "duckdb.jsonl"), 0
	if bin != "" {
		f, err := os.Create(duckFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		duck = json.NewEncoder(f)
	}
	excluded := map[string]int{}
	var stats struct{ queries, refused, failing, rows, late, merged, dynamic, appends, zeroDelay int }
	defer func() {
		t.Logf("%d session queries (%d with a dynamic gap, %d append, %d with a watermark delay of 0): %d refused (update mode), %d failing a batch; %d sessions compared, %d of them merged from several rows; %d rows late",
			stats.queries, stats.dynamic, stats.appends, stats.zeroDelay, stats.refused, stats.failing, stats.rows, stats.merged, stats.late)
		if *sparkrefSessionN >= 100 && (stats.refused == 0 || stats.merged == 0 || stats.late == 0 || stats.dynamic == 0 || stats.zeroDelay == 0) {
			t.Errorf("no refusal, merged session, late row, dynamic gap or delay of 0 in %d queries: the test proves little", stats.queries)
		}
	}()
	failed := 0
	for i := range *sparkrefSessionN {
		seed := *sparkrefSeed + uint64(i)
		rng := rand.New(rand.NewPCG(seed, 41))
		q := gen.SessionQuery(rng)
		batches := gen.Batches(rng, 1+rng.IntN(8))
		gen.ZeroDelay(rand.New(rand.NewPCG(seed, 0)), q)
		if q.WatermarkColumn != "" && q.Watermark == 0 {
			stats.zeroDelay++
		}
		oschema := append(slices.Clone(schema), sparkref.Column{Name: stream.ColSource, Type: stream.String})
		obatches := make([][]sparkref.Row, len(batches))
		for b, rows := range batches {
			for _, r := range rows {
				obatches[b] = append(obatches[b], append(slices.Clone(r), "s"))
			}
		}
		want := sparkref.Evaluate(q, oschema, obatches)
		stats.queries++
		if q.Session.When != nil {
			stats.dynamic++
		}
		if q.Mode == "append" {
			stats.appends++
		}
		stats.late += want.Late
		stats.rows += len(want.Rows)
		switch {
		case want.Fail != nil && want.Fail.Batch < 0:
			stats.refused++
		case want.Fail != nil:
			stats.failing++
		}
		for _, r := range want.Rows {
			if sessionMerged(q, r) {
				stats.merged++
			}
		}
		sink, err := runSession(t, q, schema, batches)
		var d string
		if want.Fail != nil && want.Fail.Batch < 0 {
			if errcode.Code(err) != want.Fail.Code {
				d = fmt.Sprintf("want %s before any batch, got %v", want.Fail.Code, err)
			}
		} else {
			d = diffSparkRef(want, sink, err)
		}
		switch why := q.DuckDBExcluded(oschema); {
		case d != "":
		case want.Late > 0:
			excluded["a late row"]++
		case want.Split > 0:
			excluded["a session emitted before a row that would have joined it"]++
		case why != "":
			excluded[why]++
		case duck != nil:
			if err := duck.Encode(newDuckCase(seed, q, oschema, obatches, sink, err)); err != nil {
				t.Fatal(err)
			}
			ducks++
		}
		if d != "" {
			failed++
			t.Errorf("seed %d: %s\n  --with-watermark %q --output-mode %s ansi=%v\n%s", seed, q.Render(), q.WatermarkOption(), q.Mode, q.ANSI, d)
			if failed >= 10 {
				t.Fatal("stopping after 10 failures")
			}
		}
	}
	var parts []string
	for _, why := range slices.Sorted(maps.Keys(excluded)) {
		parts = append(parts, fmt.Sprintf("%d %s", excluded[why], why))
	}
	t.Logf("not checked by DuckDB: %s", strings.Join(parts, ", "))
	if bin == "" || failed > 0 {
		return
	}
	if *sparkrefSessionN >= 300 && ducks < 100 {
		t.Errorf("only %d of %d session queries are DuckDB's to check", ducks, *sparkrefSessionN)
	}
	checkDuckDB(t, bin, duckFile, ducks)
}

// sessionMerged reports whether output row r's session is longer than any
// one gap the query gives a row: it merged several rows.
func sessionMerged(q *sparkref.Query, r sparkref.OutRow) bool {
	longest := q.Session.Gap
	if q.Session.When != nil {
		longest = q.Session.Then.D
		if e := q.Session.Else; e != nil {
			longest = max(longest, e.D)
		}
	}
	return time.Duration(r.Values[1].(int64)-r.Values[0].(int64))*time.Microsecond > longest
}

// runSession is runSparkRef, a panic reported as the query's error (the
// seed is then printed with it).
func runSession(t *testing.T, q *sparkref.Query, schema []sparkref.Column, batches [][]sparkref.Row) (sink *tableSink, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return runSparkRef(t, q, schema, batches)
}
