package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/stream"
)

// The engine's read path (engine/readpath.go) runs the WHERE, the
// pushed-down filter's event time and the source column, so the sources
// and the operator a query is built with are the bare ones, whatever its
// WHERE: the tests below are the defects wrapping caused (each failed
// with filter.Operator and filter.PushedSource), and a query with no
// stateful operator, which the wrapping could not express.

// optionalSource and optionalOperator list the optional interfaces of
// package stream the engine and the pipeline type-assert on a source and
// on an operator; TestOptionalInterfacesListed keeps them complete.
var (
	optionalSource = []reflect.Type{
		reflect.TypeFor[stream.AvailableNowSource](), reflect.TypeFor[stream.ReportingSource](),
		reflect.TypeFor[stream.RetractingSource](), reflect.TypeFor[stream.DataNotifier](),
		reflect.TypeFor[stream.Checker](), reflect.TypeFor[stream.MoveChecker](),
		reflect.TypeFor[stream.OffsetAuditor](),
	}
	optionalOperator = []reflect.Type{
		reflect.TypeFor[stream.ProgressReporter](), reflect.TypeFor[stream.CommitPreparer](),
		reflect.TypeFor[stream.WatermarkLookahead](), reflect.TypeFor[stream.SchemaOperator](),
		reflect.TypeFor[stream.StateRecorder](), reflect.TypeFor[stream.PartitionLimiter](),
		reflect.TypeFor[stream.Checker](), reflect.TypeFor[stream.RowPasser](),
		reflect.TypeFor[stream.WatermarkProducer](), reflect.TypeFor[stream.OutputRecycler](),
		reflect.TypeFor[stream.SideColumnsReader](),
	}
	// notOptional are the interfaces of package stream that are contracts
	// of their own, not capabilities of a source or an operator.
	notOptional = []string{"Source", "Operator", "Transform", "Sink", "RecordingSink", "IdentifiedSink", "SinkAdvisor",
		"Clock", "Predicate", "StateRepartitioner", "RecordedStates", "SideOperator"}
)

// TestOptionalInterfacesListed: every interface package stream declares
// is in optionalSource, optionalOperator or notOptional, so a new optional
// interface is checked by TestWhereLosesNoCapability.
func TestOptionalInterfacesListed(t *testing.T) {
	files, err := filepath.Glob("../stream/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("stream sources: %v %v", files, err)
	}
	listed := map[string]bool{}
	for _, ty := range append(slices.Clone(optionalSource), optionalOperator...) {
		listed[ty.Name()] = true
	}
	for _, n := range notOptional {
		listed[n] = true
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			name, ok := strings.CutPrefix(line, "type ")
			if !ok || !strings.HasSuffix(line, " interface {") {
				continue
			}
			name = strings.Fields(name)[0]
			if !listed[name] {
				t.Errorf("stream.%s (%s) is in no list of this test", name, filepath.Base(f))
			}
		}
	}
}

// TestWhereLosesNoCapability builds the same query with and without a
// WHERE over each source format: the sources and the operator the engine
// gets implement exactly the optional interfaces the bare ones implement.
// With the wrappers a WHERE lost stream.DataNotifier (the real-time
// trigger fell back to its poll), stream.MoveChecker (a valid movedFrom
// was refused) and stream.StateRecorder (a tampered commits/N was
// accepted).
func TestWhereLosesNoCapability(t *testing.T) {
	specs := []SourceSpec{
		{Name: "s3_backfill", Format: "s3archive", URI: "file:///tmp/none/v1.0/eth/blocks"},
		{Name: "eth_live", Format: "ethrpc", URI: "ws://127.0.0.1:1?start_block=1"},
	}
	for _, spec := range specs {
		bare, err := NewSource(spec, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		// The last two queries put filter.Operator around the aggregation
		// (a derived aggregate input; a HAVING stage): it too must keep
		// every capability of the aggregation and gain none.
		for _, where := range []string{"", " WHERE number >= 0", " WHERE number >= 0 AND block_ts > '2020-01-01'", "derive", "having"} {
			sel, tail := "count(*) AS count", ""
			switch where {
			case "derive":
				sel, where = "sum(gas_used * 2) AS g", ""
			case "having":
				where, tail = "", " HAVING count(*) > 1"
			}
			cfg := Config{Sources: []SourceSpec{spec}, WithWatermark: ReferenceWatermark, Table: t.TempDir(),
				Query: "SELECT window(block_ts, '5 minutes') AS window, miner, " + sel + " FROM " + spec.Name + where +
					" GROUP BY window(block_ts, '5 minutes'), miner" + tail}
			q, _, err := Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, ty := range optionalSource {
				if got, want := reflect.TypeOf(q.Sources[0].Source).Implements(ty), reflect.TypeOf(bare).Implements(ty); got != want {
					t.Errorf("%s%s: the query's source implements %s: %v, the source itself: %v", spec.Format, where, ty, got, want)
				}
			}
			c, err := CompileQuery(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, ty := range optionalOperator {
				if got, want := reflect.TypeOf(q.Operator).Implements(ty), reflect.TypeOf(c.agg).Implements(ty); got != want {
					t.Errorf("%s%s: the query's operator implements %s: %v, the aggregation itself: %v", spec.Format, where, ty, got, want)
				}
			}
			if (where == "") != (q.Where == nil) {
				t.Errorf("%q: engine Where %v", where, q.Where)
			}
		}
	}
}

// whereRun runs query (with the reference watermark) over the damage
// archive (one file a batch) on root's checkpoint and table, at most max
// data batches (0: all).
func whereRun(t *testing.T, root, query, mode string, max int) (*engine.RunSummary, error) {
	t.Helper()
	archive, err := damageArchive()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Checkpoint: filepath.Join(root, "ck"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "cache"),
		MaxBatches: max, Query: query, OutputMode: mode, WithWatermark: ReferenceWatermark,
		Sources: []SourceSpec{{Name: "s3_backfill", Format: "s3archive", URI: "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"}},
		Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
			"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Logger:  slog.New(slog.DiscardHandler),
	}
	return Run(context.Background(), cfg)
}

// TestWhereTamperedCommitRefused: after one batch of a query with a WHERE,
// a commits/0 whose nextBatchWatermarkMs was rewritten is refused
// CHECKPOINT_CORRUPT, as without the WHERE (the aggregation's state
// records the watermark; filter.Operator hid it, the start was accepted
// and the next batches dropped rows as late).
func TestWhereTamperedCommitRefused(t *testing.T) {
	root := t.TempDir()
	q := "SELECT window(block_ts, '5 minutes') AS window, source, miner, count(*) AS count FROM s3_backfill WHERE number >= 0" +
		" GROUP BY window(block_ts, '5 minutes'), source, miner"
	if _, err := whereRun(t, root, q, "", 1); err != nil {
		t.Fatal(err)
	}
	commit := filepath.Join(root, "ck", "commits", "0")
	orig := readFile(t, commit)
	writeFile(t, commit, "v1\n{\"nextBatchWatermarkMs\":2100}")
	before := treeHash(t, filepath.Join(root, "ck"), filepath.Join(root, "table"))
	_, err := whereRun(t, root, q, "", 0)
	if !errcode.Is(err, errcode.CheckpointCorrupt) || !strings.Contains(err.Error(), commit) {
		t.Fatalf("start on a tampered commit: %v, want %s naming %s", err, errcode.CheckpointCorrupt, commit)
	}
	if after := treeHash(t, filepath.Join(root, "ck"), filepath.Join(root, "table")); after != before {
		t.Fatal("the refused start changed files")
	}
	writeFile(t, commit, string(orig))
	if _, err := whereRun(t, root, q, "", 0); err != nil {
		t.Fatalf("restored: %v", err)
	}
}

// TestStatelessAppend: a query with no stateful operator appends exactly
// the rows its WHERE keeps, the columns it selects, once each, across a
// restart and a crash between the table's commit and commits/N (the
// re-run of the batch finds its txn in the table and writes nothing);
// checked against a recount read from the archive's Parquet files.
func TestStatelessAppend(t *testing.T) {
	archive, err := damageArchive()
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Number           int64  `parquet:"number"`
		Miner            string `parquet:"miner"`
		GasUsed          int64  `parquet:"gas_used"`
		TransactionCount int64  `parquet:"transaction_count"`
	}
	var all []int64
	counts := map[int64]int{}
	archiveRows(t, archive, func(r row) { counts[r.TransactionCount]++ })
	for c := range counts {
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) < 2 {
		t.Fatalf("the archive's blocks have transaction counts %v: no threshold splits them", all)
	}
	// A threshold that keeps some blocks and drops others.
	threshold := all[(len(all)-1)/2]
	var want []string
	total := 0
	archiveRows(t, archive, func(r row) {
		total++
		if r.TransactionCount > threshold {
			want = append(want, fmt.Sprintf("%d %s %d", r.Number, r.Miner, r.GasUsed))
		}
	})
	sort.Strings(want)
	if len(want) == 0 || len(want) == total {
		t.Fatalf("threshold %d keeps %d of %d blocks", threshold, len(want), total)
	}
	q := fmt.Sprintf("SELECT number, miner, gas_used FROM s3_backfill WHERE transaction_count > %d", threshold)
	root := t.TempDir()
	if _, err := whereRun(t, root, q, "update", 0); errcode.Code(err) != "INVALID_STREAMING_QUERY" || !strings.Contains(err.Error(), "--output-mode append") {
		t.Fatalf("update mode: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "ck")); !os.IsNotExist(err) {
		t.Fatalf("a refused start created the checkpoint: %v", err)
	}
	sum, err := whereRun(t, root, q, "append", 2)
	if err != nil || sum.DataBatches != 2 {
		t.Fatalf("first run: %+v %v", sum, err)
	}
	// A crash after the table's commit of batch 1, before commits/1.
	if err := os.Remove(filepath.Join(root, "ck", "commits", "1")); err != nil {
		t.Fatal(err)
	}
	sum, err = whereRun(t, root, q, "append", 0)
	if err != nil || sum.RerunBatchID != 1 || sum.LastBatchID != 2 {
		t.Fatalf("restart: %+v %v", sum, err)
	}
	got, ops := tableRows(t, filepath.Join(root, "table"))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("table holds %d rows, the archive %d matching (of %d)", len(got), len(want), total)
	}
	if ops != "STREAMING UPDATE x3" {
		t.Fatalf("table commits: %s", ops)
	}
	if _, err := os.Stat(filepath.Join(root, "ck", "state")); !os.IsNotExist(err) {
		t.Fatalf("a query without state has a state directory: %v", err)
	}
}

// tableRows reads the table's rows ("number miner gas_used", sorted) and
// its commits' operations.
func tableRows(t *testing.T, path string) ([]string, string) {
	t.Helper()
	ctx := context.Background()
	tbl, err := delta.OpenFS(ctx, vfs.Default, path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(snap.Schema.Fields); got != 3 {
		t.Fatalf("table schema has %d columns", got)
	}
	var rows []string
	err = snap.Rows(ctx, func(r map[string]any) error {
		rows = append(rows, fmt.Sprintf("%d %s %d", r["number"], r["miner"], r["gas_used"]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(rows)
	ops := map[string]int{}
	logs, _ := filepath.Glob(filepath.Join(path, "_delta_log", "*.json"))
	for _, l := range logs {
		b := readFile(t, l)
		if i := strings.Index(string(b), `"operation":"`); i >= 0 {
			op := string(b[i+len(`"operation":"`):])
			op = op[:strings.Index(op, `"`)]
			if op != "CREATE TABLE" {
				ops[op]++
			}
		}
	}
	var parts []string
	for op, n := range ops {
		parts = append(parts, fmt.Sprintf("%s x%d", op, n))
	}
	sort.Strings(parts)
	return rows, strings.Join(parts, ", ")
}

// TestUnknownColumnRefusedAtStart: a query reading a column its source's
// schema lacks is refused before anything is written, naming the source's
// columns.
func TestUnknownColumnRefusedAtStart(t *testing.T) {
	root := t.TempDir()
	_, err := whereRun(t, root, "SELECT number, blob_gas_used FROM s3_backfill", "append", 0)
	if errcode.Code(err) != "UNRESOLVED_COLUMN" || !strings.Contains(err.Error(), "gas_used") {
		t.Fatalf("%v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "ck")); !os.IsNotExist(err) {
		t.Fatalf("a refused start created the checkpoint: %v", err)
	}
}

// TestWhereMovedArchive: under a WHERE with a watermark, an archive moved
// and named by movedFrom resumes (filter.PushedSource hid the source's
// stream.MoveChecker: the start was refused SOURCE_LOCATION_CHANGED, its
// remedy asking for the movedFrom= already given).
func TestWhereMovedArchive(t *testing.T) {
	archive, err := damageArchive()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	copyTree(t, archive, a)
	q := "SELECT window(block_ts, '5 minutes') AS window, source, miner, count(*) AS count FROM s3_backfill WHERE number >= 0" +
		" GROUP BY window(block_ts, '5 minutes'), source, miner"
	run := func(uri string, max int) (*engine.RunSummary, error) {
		cfg := Config{
			Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "table"), LocalDir: filepath.Join(dir, "cache"),
			MaxBatches: max, Query: q, WithWatermark: ReferenceWatermark,
			Sources: []SourceSpec{{Name: "s3_backfill", Format: "s3archive", URI: uri}},
			Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
				"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
			Trigger: engine.Trigger{Kind: engine.AvailableNow},
			Logger:  slog.New(slog.DiscardHandler),
		}
		return Run(context.Background(), cfg)
	}
	if sum, err := run(movedURI(archiveLoc(a), ""), 1); err != nil || sum.DataBatches != 1 {
		t.Fatalf("first run: %+v %v", sum, err)
	}
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if _, err := run(movedURI(archiveLoc(b), ""), 0); errcode.Code(err) != errcode.SourceLocationChanged {
		t.Fatalf("not told: %v, want %s", err, errcode.SourceLocationChanged)
	}
	sum, err := run(movedURI(archiveLoc(b), archiveLoc(a)), 0)
	if err != nil || sum.DataBatches != 2 {
		t.Fatalf("movedFrom under a WHERE: %+v %v", sum, err)
	}
}

// TestRealTimeUnderWhereWakesOnNotification: under a WHERE with a
// watermark, trigger realTime with a fallback poll of an hour still runs a
// batch per newHeads notification (filter.PushedSource hid the source's
// stream.DataNotifier: the trigger waited for its poll while the
// subscription reported itself up).
func TestRealTimeUnderWhereWakesOnNotification(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	m := testManifest(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 5, Addr: "127.0.0.1:0", Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dir := t.TempDir()
	var mu sync.Mutex
	var last ethrpc.Offset
	cfg := Config{
		Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "table"), LocalDir: filepath.Join(dir, "cache"),
		Sources: []SourceSpec{{Name: "eth_live", Format: "ethrpc", URI: fmt.Sprintf(
			"%s?start_block=%d&start_parent_hash=%s&confirmations=0", n.WebsocketURL(), m.LastBlock+1, m.LastHash)}},
		Query: "SELECT window(block_ts, '5 minutes') AS window, source, miner, count(*) AS count FROM eth_live WHERE number >= 0" +
			" GROUP BY window(block_ts, '5 minutes'), source, miner",
		WithWatermark: ReferenceWatermark,
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true",
			"spark.sql.streaming.offsetLog.formatVersion": "2", "spark.sql.shuffle.partitions": "2"},
		Trigger: engine.Trigger{Kind: engine.RealTime, Interval: time.Hour},
		Logger:  slog.New(slog.DiscardHandler),
		Listeners: []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
			if p.Kind() != stream.KindData {
				return
			}
			if o, ok, _ := ethrpc.ParseOffset(p.Sources[0].EndOffset); ok {
				mu.Lock()
				last = o
				mu.Unlock()
			}
		})},
	}
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	// awaitHead waits (at most 30 s, far below the hour's poll) for a
	// committed batch ending at the node's head.
	awaitHead := func(what string) {
		t.Helper()
		want := n.Header(n.Head())
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got := last
			mu.Unlock()
			if got.Block == want.Number.Uint64() && strings.EqualFold(got.Hash, want.Hash().Hex()) {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("%s: the run ended: %v", what, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: committed %+v, head %d: no batch ran on the notification", what, got, want.Number)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	n.Mine(1)
	awaitHead("first block") // the first batch needs no notification
	for range 2 {
		n.Mine(1)
		awaitHead("a new head")
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
