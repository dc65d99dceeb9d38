package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

const ckptDir = "/ckpt"

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// errCrash is the harness's crash: the engine's crash points and the
// table's schedules die the same way.
var errCrash = streamtest.ErrCrash

// scenario is the world a datadriven script acts on: the checkpoint's file
// system, the data behind each source, the sink's table, progress events.
type scenario struct {
	fs       *vfs.MemFS
	sources  map[string]*srcWorld
	table    *streamtest.Sink
	events   []*stream.Progress
	clock    *streamtest.Clock
	hashes   map[string]string
	held     *checkpoint.Writer
	queryIDs map[string]bool
	runIDs   map[string]bool
	// positional maps a V1 source position to its world source.
	positional []string
	// dir is the checkpoint directory (move-checkpoint changes it); sinks
	// are the identified tables a run may write (sink=NAME).
	dir   string
	sinks map[string]*streamtest.Sink
	// sleepsSeen is how many clock sleeps the sleeps command printed.
	sleepsSeen int
}

func newScenario() *scenario {
	return &scenario{
		fs: vfs.NewCrashableMem(), sources: map[string]*srcWorld{},
		table:  newTable(),
		clock:  newStepClock(),
		hashes: map[string]string{}, queryIDs: map[string]bool{}, runIDs: map[string]bool{},
		dir: ckptDir, sinks: map[string]*streamtest.Sink{},
	}
}

// newStepClock is the scenarios' clock: from streamtest.Epoch, 1ms a Now,
// so that consecutive batch timestamps differ.
func newStepClock() *streamtest.Clock {
	c := streamtest.NewClock(streamtest.Epoch)
	c.SetStep(time.Millisecond)
	return c
}

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.HasPrefix(path, filepath.Join("testdata", "planner")) {
			t.Skip("planner scripts: TestPlanner")
		}
		s := newScenario()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			// Query and run ids are random UUIDs: show them as <uuid>.
			return uuidRE.ReplaceAllString(s.cmd(t, d), "<uuid>")
		})
	})
}

func argOr(d *datadriven.TestData, key, def string) string {
	if a, ok := d.Arg(key); ok {
		if len(a.Vals) == 0 {
			return ""
		}
		return a.Vals[0]
	}
	return def
}

func argInt(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	v := argOr(d, key, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, v, err)
	}
	return n
}

func argList(d *datadriven.TestData, key string) []string {
	if a, ok := d.Arg(key); ok {
		return a.Vals
	}
	return nil
}

func (s *scenario) cmd(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "source":
		// source name=N [start=] [available=] [max=] [grow=]
		name := argOr(d, "name", "")
		w := s.sources[name]
		if w == nil {
			w = &srcWorld{start: 1}
			s.sources[name] = w
		}
		w.start = argInt(t, d, "start", w.start)
		w.available = argInt(t, d, "available", w.available)
		w.max = argInt(t, d, "max", w.max)
		w.grow = argInt(t, d, "grow", w.grow)
		return ""
	case "advance":
		s.sources[argOr(d, "name", "")].available += argInt(t, d, "by", 0)
		return ""
	case "run":
		return s.run(t, d)
	case "sink":
		// sink name=N [id=ID]: an identified table a run writes with
		// sink=N (id: its identity, as a Delta metadata id; set on an
		// existing sink it plays a table whose checkpoint recorded none).
		name := argOr(d, "name", "")
		k := s.sinks[name]
		if k == nil {
			k = streamtest.NewSink()
			s.sinks[name] = k
		}
		k.ID = argOr(d, "id", k.ID)
		return ""
	case "sink-state":
		// sink-state name=N: the batches each query recorded, and how many
		// batches it applied.
		k := s.sinks[argOr(d, "name", "")]
		rec, _ := k.RecordedBatches(context.Background())
		// By batch, then id: query ids are random and print as <uuid>.
		var qs []string
		for q, b := range rec {
			qs = append(qs, fmt.Sprintf("%s@%d", q, b))
		}
		sort.Slice(qs, func(i, j int) bool {
			qi, bi, _ := strings.Cut(qs[i], "@")
			qj, bj, _ := strings.Cut(qs[j], "@")
			if len(bi) != len(bj) || bi != bj {
				return len(bi) < len(bj) || (len(bi) == len(bj) && bi < bj)
			}
			return qi < qj
		})
		return fmt.Sprintf("id=%s applied=%d recorded=[%s]\n", k.ID, len(k.Applied()), strings.Join(qs, " "))
	case "use-checkpoint":
		// use-checkpoint dir=DIR: later commands act on the checkpoint at DIR.
		s.dir = argOr(d, "dir", ckptDir)
		return ""
	case "move-checkpoint":
		// move-checkpoint to=DIR renames the checkpoint directory (mv).
		to := argOr(d, "to", "")
		if err := s.fs.MkdirAll(s.fs.PathDir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := s.fs.Rename(s.dir, to); err != nil {
			t.Fatal(err)
		}
		s.dir = to
		return ""
	case "plan":
		q, _ := s.query(t, d)
		rep, _ := Plan(context.Background(), q, s.fs, s.dir)
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetIndent("", " ")
		enc.SetEscapeHTML(false)
		enc.Encode(rep)
		return b.String()
	case "inspect":
		rep, err := Inspect(s.fs, s.dir)
		if err != nil {
			return "error: " + errcode.Code(err) + "\n"
		}
		b, _ := json.MarshalIndent(rep, "", " ")
		return string(b) + "\n"
	case "cat":
		data, err := checkpoint.ReadFile(s.fs, s.dir+"/"+argOr(d, "file", ""))
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return string(data)
	case "ls":
		var out strings.Builder
		for _, sub := range []string{"offsets", "commits", "sources"} {
			names, _ := s.fs.List(s.dir + "/" + sub)
			sort.Slice(names, func(i, j int) bool {
				a, ea := strconv.Atoi(names[i])
				b, eb := strconv.Atoi(names[j])
				if ea == nil && eb == nil {
					return a < b
				}
				return names[i] < names[j]
			})
			fmt.Fprintf(&out, "%s: %s\n", sub, strings.Join(names, " "))
		}
		if d.HasArg("state") {
			names, _ := s.fs.List(s.dir + "/state/0")
			sort.Strings(names)
			fmt.Fprintf(&out, "state/0: %s\n", strings.Join(names, " "))
		}
		return out.String()
	case "write":
		// write file=offsets/3 then the input as the file's new content
		// (a damaged file: bypasses the no-overwrite rule on purpose).
		p := s.dir + "/" + argOr(d, "file", "")
		f, err := s.fs.Create(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		content := d.Input
		if !d.HasArg("no-newline") {
			content += "\n"
		}
		f.Write([]byte(content))
		f.Sync()
		f.Close()
		return ""
	case "remove":
		if err := s.fs.Remove(s.dir + "/" + argOr(d, "file", "")); err != nil {
			t.Fatal(err)
		}
		return ""
	case "hash":
		s.hashes[argOr(d, "name", "h")] = treeHash(s.fs, s.dir)
		return ""
	case "unchanged":
		if s.hashes[argOr(d, "name", "h")] == treeHash(s.fs, s.dir) {
			return "byte-identical\n"
		}
		return "CHANGED\n"
	case "lock":
		w, err := checkpoint.Lock(s.fs, s.dir)
		if err != nil {
			t.Fatal(err)
		}
		s.held = w
		return ""
	case "unlock":
		s.held.Close()
		s.held = nil
		return ""
	case "verify":
		return s.verify(t, d)
	case "progress":
		return s.progress(t, d)
	case "sleeps":
		// sleeps: the clock's waits since the last sleeps command.
		all := s.clock.Sleeps()
		out := fmt.Sprintf("sleeps: %v\n", all[s.sleepsSeen:])
		s.sleepsSeen = len(all)
		return out
	case "ids":
		return fmt.Sprintf("query ids: %d, run ids: %d\n", len(s.queryIDs), len(s.runIDs))
	case "repartition-offline":
		o := s.options(t, d)
		op := countStates{}
		n := int(argInt(t, d, "n", 0))
		var res *RepartitionResult
		var err error
		if d.HasArg("dry") {
			res, err = PlanRepartitionOffline(o, op, n)
		} else {
			res, err = RepartitionOffline(context.Background(), o, op, n)
		}
		if err != nil {
			s.crashIfInjected(err)
			return "error: " + codeOf(err) + "\n"
		}
		var out strings.Builder
		if d.HasArg("steps") || d.HasArg("dry") {
			out.WriteString(res.Steps)
		}
		switch {
		case res.AlreadyAt:
			fmt.Fprintf(&out, "already at %d partitions (batch %d): nothing written\n", res.To, res.BatchID)
		case d.HasArg("dry"):
		default:
			fmt.Fprintf(&out, "repartitioned batch %d: %d -> %d redo=%t keys %d -> %d\n", res.BatchID, res.From, res.To, res.Redo, res.Stats.KeysBefore, res.Stats.KeysAfter)
		}
		return out.String()
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

func codeOf(err error) string {
	if c := errcode.Code(err); c != "" {
		return c
	}
	if errors.Is(err, errCrash) {
		return "CRASH"
	}
	return "UNCODED: " + err.Error()
}

// crashIfInjected simulates the process dying: unsynced data is lost.
func (s *scenario) crashIfInjected(err error) {
	if errors.Is(err, errCrash) {
		s.fs = s.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	}
}

func (s *scenario) query(t *testing.T, d *datadriven.TestData) (Query, map[string]*memSource) {
	q := Query{Name: "blocks", Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource},
		Watermark: &Watermark{Column: ethblock.ColBlockTS, Delay: time.Duration(argInt(t, d, "delay-min", 1000000)) * time.Minute},
		Operator:  &countOp{}, Conf: map[string]string{}}
	if d.HasArg("prepare") {
		// The operator prepares its commit while the sink writes.
		q.Operator = newPrepOp()
	}
	srcs := map[string]*memSource{}
	var worlds []string
	defer func() {
		if len(worlds) > 0 && strings.HasPrefix(argList(d, "sources")[0], "~") {
			s.positional = worlds
		}
	}()
	for _, spec := range argList(d, "sources") {
		// "name" is a named source; "~name" uses world source name, unnamed.
		world, name := strings.TrimPrefix(spec, "~"), spec
		if strings.HasPrefix(spec, "~") {
			name = ""
		}
		worlds = append(worlds, world)
		w := s.sources[world]
		if w == nil {
			w = &srcWorld{start: 1}
			s.sources[world] = w
		}
		ms := &memSource{w: w, name: world}
		srcs[world] = ms
		q.Sources = append(q.Sources, NamedSource{Name: name, Source: ms})
	}
	for _, kv := range argList(d, "conf") {
		k, v, _ := strings.Cut(kv, ":")
		full := map[string]string{
			"evo": checkpoint.ConfSourceEvolution, "v": checkpoint.ConfOffsetLogVersion,
			"shuffle": checkpoint.ConfShufflePartitions, "parts": checkpoint.ConfStatePartitions,
			"retain": checkpoint.ConfMinBatchesToRetain, "nodata": checkpoint.ConfNoDataBatches,
			"provider": checkpoint.ConfProviderClass,
		}[k]
		if full == "" {
			t.Fatalf("unknown conf shorthand %q", k)
		}
		q.Conf[full] = v
	}
	switch tr := argOr(d, "trigger", "availableNow"); tr {
	case "availableNow":
		q.Trigger = Trigger{Kind: AvailableNow}
	case "once":
		q.Trigger = Trigger{Kind: Once}
	case "processingTime":
		q.Trigger = Trigger{Kind: ProcessingTime, Interval: time.Second}
	case "realTime":
		q.Trigger = Trigger{Kind: RealTime}
	default:
		t.Fatalf("trigger %q", tr)
	}
	q.MaxDataBatches = int(argInt(t, d, "max-batches", 0))
	if loc := argOr(d, "location", ""); loc != "" {
		// The sink at location loc (sink=NAME): the query records its shape.
		sh := &shape.Shape{Sink: shape.Sink{Format: "memory", Location: loc}, Trigger: q.Trigger.Kind.String()}
		for _, ns := range q.Sources {
			sh.Sources = append(sh.Sources, shape.Source{Name: ns.Name, Provider: "mem", Location: "mem://" + ns.Source.(*memSource).name})
		}
		q.Shape = sh
	}
	q.SinkShared = d.HasArg("table-shared")
	return q, srcs
}

func (s *scenario) options(t *testing.T, d *datadriven.TestData) Options {
	o := Options{CheckpointDir: s.dir, FS: s.fs, Clock: s.clock,
		Listeners: []Listener{ListenerFunc(func(p *stream.Progress) { s.events = append(s.events, p) })}}
	if c := argOr(d, "crash", ""); c != "" {
		point, nth, _ := strings.Cut(c, "@")
		n := 1
		if nth != "" {
			n, _ = strconv.Atoi(nth)
		}
		hits := 0
		o.crash = func(p string) error {
			if p == point {
				hits++
				if hits == n {
					return errCrash
				}
			}
			return nil
		}
	}
	return o
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	q, _ := s.query(t, d)
	o := s.options(t, d)
	// sink-fail=N: the run's N-th AddBatch fails and applies nothing;
	// sink-crash=N: the process dies right after the N-th applies.
	s.table.Failures, s.table.Points = nil, nil
	if c := argOr(d, "sink-fail", ""); c != "" {
		s.table.Failures = streamtest.MustPoints("before-sink@" + c)
	}
	if c := argOr(d, "sink-crash", ""); c != "" {
		s.table.Points = streamtest.MustPoints("after-sink@" + c)
	}
	q.Sink = streamtest.Plain(s.table)
	if name := argOr(d, "sink", ""); name != "" {
		q.Sink = s.sinks[name]
	}
	s.clock.StopAfter(int(argInt(t, d, "stop-after-sleeps", 0)))
	var out strings.Builder
	if d.HasArg("steps") {
		// Print each batch's plan as the driver starts it.
		o.trace = func(p *batchPlan) { out.WriteString(stepList(p)) }
	}
	if d.HasArg("phases") {
		s.tracePhases(&o, &out)
	}
	sum, err := Run(context.Background(), q, o)
	if sum != nil {
		if sum.QueryID != "" {
			s.queryIDs[sum.QueryID] = true
		}
		s.runIDs[sum.RunID] = true
		fmt.Fprintf(&out, "batches %d..%d: data=%d no-data=%d control=%d", sum.FirstBatchID, sum.LastBatchID, sum.DataBatches, sum.NoDataBatches, sum.ControlBatches)
		if sum.RerunBatchID >= 0 {
			fmt.Fprintf(&out, " rerun=%d", sum.RerunBatchID)
		}
		if sum.NewCheckpoint {
			out.WriteString(" new")
		}
		if sum.Interrupted {
			out.WriteString(" interrupted")
		}
		out.WriteString("\n")
		for _, w := range sum.Warnings {
			fmt.Fprintf(&out, "warning: %s\n", w)
		}
	}
	if err != nil {
		s.crashIfInjected(err)
		fmt.Fprintf(&out, "error: %s\n", codeOf(err))
		if d.HasArg("show-error") {
			fmt.Fprintf(&out, "%v\n", err)
		}
	}
	return out.String()
}

// verify checks the sink's table against a brute-force recount of every
// block each source committed: nothing lost, nothing doubled.
func (s *scenario) verify(t *testing.T, d *datadriven.TestData) string { return s.verifyTable() }

func (s *scenario) verifyTable() string {
	dir := checkpoint.Dir{FS: s.fs, Path: s.dir}
	snap, err := dir.ReadSnapshot()
	if err != nil {
		return "error: " + codeOf(err) + "\n"
	}
	if snap.CommittedOffsets == nil {
		return "nothing committed\n"
	}
	// Each source's last committed end: from the latest committed entry, or
	// its tombstone for a removed source.
	ends := map[string]int64{}
	for _, so := range snap.CommittedOffsets.Sources {
		if so.Offset != nil {
			var o blockOffset
			json.Unmarshal(so.Offset, &o)
			ends[so.Key] = o.Block
		}
	}
	for k, tb := range snap.CommittedOffsets.Metadata.Tombstones {
		if tb.LastOffset != nil {
			var o blockOffset
			json.Unmarshal(tb.LastOffset, &o)
			ends[k] = o.Block
		}
	}
	want := map[string]int64{}
	var total int64
	for name, end := range ends {
		w := s.sources[name]
		srcCol := name
		if i, err := strconv.Atoi(name); err == nil {
			// unnamed: positional key, empty source column
			srcCol, w = "", s.sources[s.positional[i]]
		}
		for n := w.start; n <= end; n++ {
			want[opKey(blockTS(n), srcCol, blockMiner(n))]++
			total++
		}
	}
	var bad []string
	rows := tableCounts(s.table)
	for k, v := range want {
		if rows[k] != v {
			bad = append(bad, fmt.Sprintf("%s: table %d, recount %d", k, rows[k], v))
		}
	}
	for k := range rows {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: in table only", k))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		return "MISMATCH\n" + strings.Join(bad, "\n") + "\n"
	}
	return fmt.Sprintf("ok: %d blocks, %d keys\n", total, len(want))
}

// progress prints the last n events (or those since the last call).
func (s *scenario) progress(t *testing.T, d *datadriven.TestData) string {
	n := int(argInt(t, d, "last", 1))
	if n > len(s.events) {
		n = len(s.events)
	}
	var out strings.Builder
	for _, p := range s.events[len(s.events)-n:] {
		if d.HasArg("json") {
			b, _ := json.Marshal(p)
			// Durations and rates depend on the clock's steps: keep the shape.
			out.Write(b)
			out.WriteString("\n")
			continue
		}
		keys := sortedKeys(p.DurationMs)
		fmt.Fprintf(&out, "batch %d %s rows=%d wm=%s durationMs=%s", p.BatchID, p.Kind(), p.NumInputRows, p.EventTime["watermark"], strings.Join(keys, ","))
		for _, op := range p.StateOperators {
			fmt.Fprintf(&out, " state[total=%d updated=%d removed=%d parts=%d", op.NumRowsTotal, op.NumRowsUpdated, op.NumRowsRemoved, op.NumShufflePartitions)
			for _, k := range sortedKeys(op.CustomMetrics) {
				fmt.Fprintf(&out, " %s=%d", k, op.CustomMetrics[k])
			}
			out.WriteString("]")
		}
		out.WriteString("\n")
		for _, sp := range p.Sources {
			name := "<unnamed>"
			if sp.Name != nil {
				name = *sp.Name
			}
			fmt.Fprintf(&out, "  %s: %s -> %s rows=%d\n", name, rawStr(sp.StartOffset), rawStr(sp.EndOffset), sp.NumInputRows)
		}
	}
	return out.String()
}
