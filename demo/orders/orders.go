package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/demo"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

var discard = slog.New(slog.DiscardHandler)

// Scale of the example: small enough to run in seconds, large enough that
// every batch holds hundreds of rows and the state thousands of keys.
const (
	regionCommits  = 6
	regionOrders   = 200
	eventCommits   = 24
	eventsPerChunk = 400
)

// Options configure Run.
type Options struct {
	// WorkDir holds the tables, checkpoints and outputs; recreated.
	WorkDir string
	// ResultsDir receives the results files (Files).
	ResultsDir string
	// Seed draws the orders (DefaultSeed if 0).
	Seed uint64
	// DuckDB is the path of a duckref binary (scripts/duckref); given, the
	// activity table is also checked against DuckDB over order_events'
	// data files.
	DuckDB string
	Out    io.Writer
	Logger *slog.Logger
}

// DefaultSeed is the seed of the reference run (results/orders).
const DefaultSeed = 1

// The results files, in ResultsDir.
const (
	FileBatches = "batches.csv"
	FileUnion   = "union.csv"
	FileSkew    = "skew.csv"
	FileSummary = "summary.txt"
)

// Files are the results files Run writes.
var Files = []string{FileBatches, FileUnion, FileSkew, FileSummary}

// Check is one verified claim of the example.
type Check struct {
	Name   string
	Pass   bool
	Detail string
}

// Report is what Run found.
type Report struct {
	Checks []Check
}

// Passed reports whether every check holds.
func (r *Report) Passed() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return len(r.Checks) > 0
}

func (r *Report) check(name string, pass bool, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, Pass: pass, Detail: fmt.Sprintf(format, args...)})
}

// Run runs the orders example (package doc) and writes its results.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = discard
	}
	// Absolute: the sources are file:// URIs.
	wd, err := filepath.Abs(o.WorkDir)
	if err != nil {
		return nil, err
	}
	o.WorkDir = wd
	if err := os.RemoveAll(o.WorkDir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", o.WorkDir, err)
	}
	tables := filepath.Join(o.WorkDir, "tables")
	data := generate(o.Seed, regionCommits, regionOrders, eventCommits, eventsPerChunk)
	for name, commits := range map[string][][]Order{"orders_us": data.Regions["us"], "orders_eu": data.Regions["eu"], "order_events": data.Events} {
		if err := writeTable(ctx, filepath.Join(tables, name), commits); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(o.Out, "orders example, seed %d: orders_us and orders_eu (%d commits of %d orders each), order_events (%d commits, %d events), Delta tables written by ethstream\n",
		o.Seed, regionCommits, regionOrders, eventCommits, eventCommits*eventsPerChunk)
	rep := &Report{}
	u, err := runUnion(ctx, o, tables, data, rep)
	if err != nil {
		return rep, err
	}
	a, err := runActivity(ctx, o, tables, data, rep)
	if err != nil {
		return rep, err
	}
	if err := os.MkdirAll(o.ResultsDir, 0o755); err != nil {
		return rep, err
	}
	files := map[string]string{FileUnion: u.csv(), FileBatches: a.batchesCSV(), FileSkew: a.skewCSV(), FileSummary: rep.summary(o.Seed)}
	for _, name := range Files {
		if _, err := durable.Bytes(durable.For(vfs.Default), o.ResultsDir, name, durable.Options{Mode: durable.Replace}, []byte(files[name])); err != nil {
			return rep, fmt.Errorf("write %s: %w", name, err)
		}
	}
	io.WriteString(o.Out, files[FileSummary])
	return rep, nil
}

// summary renders the checks.
func (r *Report) summary(seed uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "orders example (seed %d): %d checks\n", seed, len(r.Checks))
	for _, c := range r.Checks {
		verdict := "PASS"
		if !c.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(&b, "%s %-28s %s\n", verdict, c.Name, c.Detail)
	}
	return b.String()
}

// offsetText is a Delta source offset without its table id (a random
// uuid): version and index.
func offsetText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "-"
	}
	var off struct {
		ReservoirVersion int64 `json:"reservoirVersion"`
		Index            int64 `json:"index"`
		IsStarting       bool  `json:"isStartingVersion"`
	}
	if err := json.Unmarshal(raw, &off); err != nil {
		return string(raw)
	}
	return fmt.Sprintf("v%d/i%d", off.ReservoirVersion, off.Index)
}

// source is a Delta source of the example.
func source(tables, name string, maxFiles int) pipeline.SourceSpec {
	return pipeline.SourceSpec{Name: name, Format: "delta", URI: "file://" + filepath.ToSlash(filepath.Join(tables, name)) + "?maxFilesPerTrigger=" + strconv.Itoa(maxFiles)}
}

// union is step (a)'s outcome.
type union struct {
	rows []string // union.csv lines
}

func (u *union) csv() string {
	return "step,sources,outcome,code,batches,end_offsets,table\n" + strings.Join(u.rows, "\n") + "\n"
}

// runUnion is the source-evolution article's "Get started": orders_us and
// orders_eu, named, unioned in SQL (UNION ALL, as unionQuery writes it),
// counted and summed per region into a Delta table; then orders_eu removed
// (its name tombstoned) and re-added under that name (refused).
// unionQuery is the Get started query over the named sources srcs: their
// UNION ALL in a subquery (one source: the source itself), counted and
// summed per region. Removing a source is removing its branch, as a Spark
// user edits orders_us.union(orders_eu).
func unionQuery(srcs []string) string {
	from := srcs[0]
	if len(srcs) > 1 {
		branches := make([]string, len(srcs))
		for i, s := range srcs {
			branches[i] = "SELECT * FROM " + s
		}
		from = "(" + strings.Join(branches, " UNION ALL ") + ")"
	}
	return "SELECT region, count(*) AS orders, sum(amount) AS amount FROM " + from + " GROUP BY region"
}

func runUnion(ctx context.Context, o Options, tables string, data *Data, rep *Report) (*union, error) {
	dir := filepath.Join(o.WorkDir, "union")
	base := pipeline.Config{Checkpoint: filepath.Join(dir, "checkpoint"), Table: filepath.Join(dir, "orders_by_region"), LocalDir: filepath.Join(dir, "local"),
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: o.Logger,
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "2"},
	}
	u := &union{}
	step := func(name string, srcs []string, maxBatches int, refusal bool) (string, []*stream.Progress, error) {
		cfg := base
		cfg.MaxBatches = maxBatches
		cfg.Query = unionQuery(srcs)
		for _, s := range srcs {
			cfg.Sources = append(cfg.Sources, source(tables, s, 2))
		}
		var events []*stream.Progress
		cfg.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) { events = append(events, p) })}
		before, _ := demo.TreeHash(cfg.Checkpoint)
		_, err := pipeline.Run(ctx, cfg)
		outcome, code := "ran", ""
		if err != nil {
			code = errcode.Code(err)
			if code == "" || !refusal {
				return "", nil, fmt.Errorf("union step %s: %w", name, err)
			}
			after, _ := demo.TreeHash(cfg.Checkpoint)
			outcome = "refused"
			if before == after {
				outcome += " (checkpoint unchanged)"
			}
		}
		ends := map[string]string{}
		for _, p := range events {
			for _, sp := range p.Sources {
				ends[*sp.Name] = offsetText(sp.EndOffset)
			}
		}
		var endText []string
		for _, s := range srcs {
			if e, ok := ends[s]; ok {
				endText = append(endText, s+"="+e)
			}
		}
		rows, err := regionRows(ctx, cfg.Table)
		if err != nil {
			return "", nil, err
		}
		u.rows = append(u.rows, fmt.Sprintf("%s,%s,%s,%s,%d,%s,%s", name, strings.Join(srcs, "+"), outcome, code, len(events),
			strings.Join(endText, " "), strings.Join(rows, " ")))
		fmt.Fprintln(o.Out, strings.TrimRight(fmt.Sprintf("union: %-40s %s %s", name, outcome, code), " "))
		return code, events, nil
	}
	if _, _, err := step("both sources", []string{"orders_us", "orders_eu"}, 2, false); err != nil {
		return nil, err
	}
	if _, _, err := step("orders_eu removed", []string{"orders_us"}, 1, false); err != nil {
		return nil, err
	}
	code, _, err := step("orders_eu re-added, same name", []string{"orders_us", "orders_eu"}, 1, true)
	if err != nil {
		return nil, err
	}
	rep.check("tombstoned name refused", code == errcode.TombstoneNameReuse && strings.Contains(u.rows[2], "checkpoint unchanged"),
		"re-adding orders_eu: %s", orNone(code))
	// The table: every US order (read by both runs), and the EU orders of
	// the first run only (2 batches of 2 commits).
	want := map[string][2]int64{}
	for region, commits := range data.Regions {
		n := len(commits)
		if region == "eu" {
			n = 4
		}
		for _, c := range commits[:n] {
			for _, x := range c {
				w := want[region]
				want[region] = [2]int64{w[0] + 1, w[1] + x.Cents}
			}
		}
	}
	var wantRows []string
	for _, region := range []string{"eu", "us"} {
		wantRows = append(wantRows, fmt.Sprintf("%s:%d:%.2f", region, want[region][0], float64(want[region][1])/100))
	}
	got, err := regionRows(ctx, base.Table)
	if err != nil {
		return nil, err
	}
	rep.check("union table = recount", slices.Equal(got, wantRows), "orders_by_region %s; recount %s", strings.Join(got, " "), strings.Join(wantRows, " "))
	return u, nil
}

// regionRows reads orders_by_region as region:orders:amount, sorted.
func regionRows(ctx context.Context, path string) ([]string, error) {
	t, err := delta.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		return nil, err
	}
	var out []string
	err = s.Rows(ctx, func(r map[string]any) error {
		out = append(out, fmt.Sprintf("%v:%v:%.2f", r["region"], r["orders"], r["amount"]))
		return nil
	})
	slices.Sort(out)
	return out, err
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// activity is step (b) and (c)'s outcome.
type activity struct {
	events  []*stream.Progress
	runs    map[string]int // run id -> run number
	offline *engine.RepartitionResult
	table   map[string][2]int64 // "window customer" -> events, cents
	skew    []string
}

// activityQuery is the repartitioning article's customer-activity query.
const activityQuery = "SELECT window(event_time, '30 minutes') AS window, customer, count(*) AS events, sum(amount) AS amount " +
	"FROM order_events GROUP BY window(event_time, '30 minutes'), customer"

// runActivity is the repartitioning article's stream: order_events, one
// commit per batch, 30-minute windows per customer with count and sum
// under a 20-minute watermark, appended to a Delta table; 8 batches on 4
// state partitions, then 8 on 8 (online: the conf, a repartition control
// batch), then back to 4 offline (checkpoint repartition) and to the end.
func runActivity(ctx context.Context, o Options, tables string, data *Data, rep *Report) (*activity, error) {
	dir := filepath.Join(o.WorkDir, "activity")
	ckpt := filepath.Join(dir, "checkpoint")
	base := pipeline.Config{Checkpoint: ckpt, Table: filepath.Join(dir, "customer_activity"), LocalDir: filepath.Join(dir, "local"),
		Sources: []pipeline.SourceSpec{source(tables, "order_events", 1)}, Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: o.Logger,
		Query: activityQuery, WithWatermark: "event_time, 20 minutes", OutputMode: "append"}
	conf := func(kv ...string) map[string]string {
		m := map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "4"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	a := &activity{runs: map[string]int{}}
	run := func(n int, c map[string]string, maxBatches int) error {
		cfg := base
		cfg.Conf, cfg.MaxBatches = c, maxBatches
		if _, err := pipeline.Run(ctx, cfg); err != nil {
			return fmt.Errorf("activity run %d: %w", n, err)
		}
		events, err := engine.ReadProgress(vfs.Default, ckpt)
		if err != nil {
			return err
		}
		for _, p := range events {
			if _, ok := a.runs[p.RunID]; !ok {
				a.runs[p.RunID] = n
			}
		}
		fmt.Fprintf(o.Out, "activity: run %d done (%d progress events so far)\n", n, len(events))
		return nil
	}
	if err := run(1, conf(), 8); err != nil {
		return nil, err
	}
	if err := run(2, conf("spark.sql.streaming.stateStore.partitions", "8"), 8); err != nil {
		return nil, err
	}
	res, err := engine.RepartitionOffline(ctx, engine.Options{CheckpointDir: ckpt, FS: vfs.Default, LocalDir: base.LocalDir, Logger: o.Logger}, state.Recorded{}, 4)
	if err != nil {
		return nil, fmt.Errorf("checkpoint repartition --partitions 4: %w", err)
	}
	a.offline = res
	fmt.Fprintf(o.Out, "activity: checkpoint repartition 8 -> 4 as batch %d (%d keys before, %d after)\n", res.BatchID, res.Stats.KeysBefore, res.Stats.KeysAfter)
	if err := run(3, conf(), 0); err != nil {
		return nil, err
	}
	if a.events, err = engine.ReadProgress(vfs.Default, ckpt); err != nil {
		return nil, err
	}
	if a.table, err = activityTable(ctx, base.Table); err != nil {
		return nil, err
	}
	a.prove(rep, data, o)
	return a, nil
}

// activityTable reads customer_activity: "window-start customer" ->
// (events, amount in cents), failing on a duplicate key.
func activityTable(ctx context.Context, path string) (map[string][2]int64, error) {
	t, err := delta.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		return nil, err
	}
	out := map[string][2]int64{}
	err = s.Rows(ctx, func(r map[string]any) error {
		w := r["window"].(map[string]any)
		k := w["start"].(time.Time).UTC().Format("2006-01-02T15:04") + " " + r["customer"].(string)
		if _, dup := out[k]; dup {
			return fmt.Errorf("customer_activity holds %s twice", k)
		}
		out[k] = [2]int64{r["events"].(int64), int64(r["amount"].(float64)*100 + 0.5)}
		return nil
	})
	return out, err
}

// recount is the brute-force answer over the generated events: windows the
// final watermark (the newest event time less 20 minutes) closed.
func recount(data *Data) map[string][2]int64 {
	var maxT time.Time
	for _, c := range data.Events {
		for _, x := range c {
			if x.EventTime.After(maxT) {
				maxT = x.EventTime
			}
		}
	}
	wm := maxT.Add(-20 * time.Minute)
	out := map[string][2]int64{}
	for _, c := range data.Events {
		for _, x := range c {
			ws := x.EventTime.Truncate(30 * time.Minute)
			if ws.Add(30 * time.Minute).After(wm) {
				continue
			}
			k := ws.Format("2006-01-02T15:04") + " " + x.Customer
			v := out[k]
			out[k] = [2]int64{v[0] + 1, v[1] + x.Cents}
		}
	}
	return out
}

// prove checks the run from the query's own progress records and the
// table: one query id, continuous batch ids, each source offset continuing
// the last, state keys equal across every repartition, and the table equal
// to a recount (and to DuckDB's, when given).
func (a *activity) prove(rep *Report, data *Data, o Options) {
	ev := a.events
	ids := map[string]bool{}
	for _, p := range ev {
		ids[p.ID] = true
	}
	rep.check("one query id", len(ids) == 1 && len(a.runs) == 3, "%d query id over %d runs, %d progress events", len(ids), len(a.runs), len(ev))
	// Batch ids: the progress records' and the offline repartition's.
	var batchIDs []int64
	for _, p := range ev {
		batchIDs = append(batchIDs, p.BatchID)
	}
	if a.offline != nil && !slices.Contains(batchIDs, a.offline.BatchID) {
		batchIDs = append(batchIDs, a.offline.BatchID)
	}
	slices.Sort(batchIDs)
	continuous := len(batchIDs) > 0
	for i, id := range batchIDs {
		continuous = continuous && id == int64(i)
	}
	rep.check("continuous batch ids", continuous, "batches 0-%d, each once (the offline repartition is batch %d)", len(batchIDs)-1, a.offline.BatchID)
	chained, last := true, ""
	for _, p := range ev {
		for _, sp := range p.Sources {
			if last != "" && offsetText(sp.StartOffset) != last {
				chained = false
			}
			last = offsetText(sp.EndOffset)
		}
	}
	// Version 0 creates the table and versions 1..eventCommits append:
	// the end past them all is the next version, before its first file.
	wantEnd := fmt.Sprintf("v%d/i-1", eventCommits+1)
	rep.check("source offsets continue", chained && last == wantEnd, "each batch of order_events starts at the previous end; last end %s (after version %d)", last, eventCommits)
	// Keys before = after: online, the control batch's state rows against
	// the batch before; offline, the repartition's own count.
	keys := true
	var detail []string
	for i, p := range ev {
		if p.Kind() != stream.KindRepartition || i == 0 || len(p.StateOperators) == 0 || len(ev[i-1].StateOperators) == 0 {
			continue
		}
		b, c := ev[i-1].StateOperators[0], p.StateOperators[0]
		keys = keys && b.NumRowsTotal == c.NumRowsTotal
		detail = append(detail, fmt.Sprintf("online %d -> %d partitions: %d keys -> %d", b.NumShufflePartitions, c.NumShufflePartitions, b.NumRowsTotal, c.NumRowsTotal))
	}
	s := a.offline.Stats
	keys = keys && s.KeysBefore == s.KeysAfter && s.KeysBefore > 0
	detail = append(detail, fmt.Sprintf("offline %d -> %d partitions: %d keys -> %d", s.From, s.To, s.KeysBefore, s.KeysAfter))
	rep.check("keys before = after", keys && len(detail) == 2, "%s", strings.Join(detail, "; "))
	want := recount(data)
	rep.check("table = recount", equalTables(a.table, want), "customer_activity %d rows (window, customer); recount %d", len(a.table), len(want))
	if o.DuckDB != "" {
		duck, err := duckCount(o.DuckDB, filepath.Join(o.WorkDir, "tables", "order_events"))
		detail := fmt.Sprintf("DuckDB %d rows", len(duck))
		if err != nil {
			detail = err.Error()
		}
		rep.check("table = DuckDB", err == nil && equalTables(a.table, duck), "%s", detail)
	}
	a.skew = skew(a.table)
	// The hot customers (c0001-c0003) are the busiest three, in any order.
	hot := len(a.skew) > hotCustomers
	for i := 0; hot && i < hotCustomers; i++ {
		c, _, _ := strings.Cut(a.skew[i], ",")
		n, err := strconv.Atoi(strings.TrimPrefix(c, "c"))
		hot = err == nil && n >= 1 && n <= hotCustomers
	}
	rep.check("skew shows", hot, "the %d hot customers lead: %s", hotCustomers, strings.Join(a.skew[:min(len(a.skew), hotCustomers)], "; "))
}

func equalTables(a, b map[string][2]int64) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// skew is the customers by events in the table, most first:
// "customer,events,windows,amount".
func skew(t map[string][2]int64) []string {
	type agg struct{ events, windows, cents int64 }
	by := map[string]*agg{}
	for k, v := range t {
		_, c, _ := strings.Cut(k, " ")
		if by[c] == nil {
			by[c] = &agg{}
		}
		by[c].events += v[0]
		by[c].windows++
		by[c].cents += v[1]
	}
	names := make([]string, 0, len(by))
	for c := range by {
		names = append(names, c)
	}
	slices.SortFunc(names, func(x, y string) int {
		if by[x].events != by[y].events {
			return int(by[y].events - by[x].events)
		}
		return strings.Compare(x, y)
	})
	var out []string
	for _, c := range names[:min(len(names), 10)] {
		out = append(out, fmt.Sprintf("%s,%d,%d,%.2f", c, by[c].events, by[c].windows, float64(by[c].cents)/100))
	}
	return out
}

func (a *activity) skewCSV() string {
	return "customer,events,windows,amount\n" + strings.Join(a.skew, "\n") + "\n"
}

// batchesCSV is one line per progress event: the run, batch id, kind,
// state partitions, the source's offsets (version/index), input rows,
// state keys, rows dropped as late and rows appended to the table.
func (a *activity) batchesCSV() string {
	var b strings.Builder
	b.WriteString("run,batch_id,kind,state_partitions,start_offset,end_offset,input_rows,state_keys,dropped_late,output_rows\n")
	for _, p := range a.events {
		var parts, keys, dropped int64
		if len(p.StateOperators) > 0 {
			s := p.StateOperators[0]
			parts, keys, dropped = s.NumShufflePartitions, s.NumRowsTotal, s.NumRowsDroppedByWatermark
		}
		start, end := "-", "-"
		if len(p.Sources) > 0 {
			start, end = offsetText(p.Sources[0].StartOffset), offsetText(p.Sources[0].EndOffset)
		}
		fmt.Fprintf(&b, "%d,%d,%s,%d,%s,%s,%d,%d,%d,%d\n", a.runs[p.RunID], p.BatchID, p.Kind(), parts, start, end, p.NumInputRows, keys, dropped, p.Sink.NumOutputRows)
	}
	return b.String()
}

var errNoDuckDB = errors.New("duckref printed no rows")
