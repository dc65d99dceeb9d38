package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// plannerWorld is what a planner script acts on: offsets and commit entries
// held as values (no file system, no source, no operator, no goroutine), the
// start plan computed from them, and the loop state the planner reads.
type plannerWorld struct {
	offsets map[int64]*checkpoint.OffsetEntry
	commits map[int64]*checkpoint.CommitEntry
	sp      *startPlan
	c       planConf
	st      loopState
	last    *batchPlan // the plan a "commit" command reports back
}

// TestPlanner runs testdata/planner/*: the pure planner alone.
//
//	offsets id=N           the input is offsets/N's content
//	commit id=N wm=MS      commits/N
//	start sources=(a,b) conf=(evo:true,parts:8) [operators=N]
//	                       planStart on the entries, then the start's batches
//	                       (the pending one, a control batch) as plans, for a
//	                       plan of N stateful operators (default 1)
//	next latest=(a=5,b=null) [probe=true|false] [now=MS] [entry] [phases] [prev-watermark]
//	                       planNext on the loop state; N is {"block":N};
//	                       phases groups the steps by the phase they carry;
//	                       prev-watermark prints the watermark later
//	                       operators drop late input by
//	commit-plan wm=MS      the driver's report: advance past the last plan
//	offline n=N [phases]   planOffline (`checkpoint repartition`)
func TestPlanner(t *testing.T) {
	datadriven.Walk(t, "testdata/planner", func(t *testing.T, path string) {
		w := &plannerWorld{offsets: map[int64]*checkpoint.OffsetEntry{}, commits: map[int64]*checkpoint.CommitEntry{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string { return w.cmd(t, d) })
	})
}

func (w *plannerWorld) snapshot() *checkpoint.Snapshot {
	s := &checkpoint.Snapshot{Path: "/ckpt", HasMetadata: true, Metadata: checkpoint.Metadata{ID: "q"}, LatestID: -1, CommittedID: -1}
	for id, e := range w.offsets {
		if id > s.LatestID {
			s.LatestID, s.Latest = id, e
		}
	}
	s.Prev = w.offsets[s.LatestID-1]
	for id, c := range w.commits {
		if id > s.CommittedID {
			s.CommittedID, s.Committed = id, c
		}
	}
	s.CommittedOffsets = w.offsets[s.CommittedID]
	return s
}

func (w *plannerWorld) cmd(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "offsets":
		id := argInt(t, d, "id", 0)
		e, err := checkpoint.ParseOffsets(fmt.Sprintf("offsets/%d", id), []byte(d.Input+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		w.offsets[id] = e
		return ""
	case "commit":
		w.commits[argInt(t, d, "id", 0)] = &checkpoint.CommitEntry{NextBatchWatermarkMs: argInt(t, d, "wm", 0)}
		return ""
	case "start":
		return w.start(t, d)
	case "next":
		v := batchView{loopState: w.st, NowMs: argInt(t, d, "now", 0)}
		if a, ok := d.Arg("latest"); ok {
			v.Latest = map[string]json.RawMessage{}
			for _, kv := range a.Vals {
				k, n, _ := strings.Cut(kv, "=")
				v.Latest[k] = blockOff(n)
			}
		}
		if p := argOr(d, "probe", ""); p != "" {
			b := p == "true"
			v.NeedsNoData = &b
		}
		dec := planNext(w.c, v)
		switch {
		case dec.Need == needLatest:
			return "need: latest offsets\n"
		case dec.Need == needProbe:
			return fmt.Sprintf("need: operator's no-data answer at watermark %d\n", v.Watermark)
		case dec.Plan == nil:
			return "idle\n"
		}
		w.last = dec.Plan
		out := stepList(dec.Plan)
		if d.HasArg("phases") {
			out = phaseList(dec.Plan)
		}
		if d.HasArg("prev-watermark") {
			out += fmt.Sprintf("late input: at or before %d\n", dec.Plan.PrevWatermark)
		}
		if d.HasArg("entry") {
			b, err := checkpoint.EncodeOffsets(dec.Plan.Entry)
			if err != nil {
				t.Fatal(err)
			}
			out += string(b)
		}
		return out
	case "commit-plan":
		if w.last == nil {
			t.Fatal("no plan to commit")
		}
		w.st = advance(w.st, w.last, argInt(t, d, "wm", w.last.Entry.Metadata.BatchWatermarkMs))
		w.last = nil
		return w.state()
	case "offline":
		p, res, err := planOffline(w.snapshot(), int(argInt(t, d, "n", 0)), int(argInt(t, d, "retain", 100)), 1)
		switch {
		case err != nil:
			return "error: " + errcode.Code(err) + "\n"
		case p == nil:
			return fmt.Sprintf("already at %d partitions (batch %d)\n", res.To, res.BatchID)
		}
		if d.HasArg("phases") {
			return phaseList(p)
		}
		return stepList(p)
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

// start runs planStart and prints the start's batches, advancing past each
// with its batch watermark as the driver would report.
func (w *plannerWorld) start(t *testing.T, d *datadriven.TestData) string {
	q, _ := (&scenario{sources: map[string]*srcWorld{}}).query(t, d)
	s, err := parseSettings(q.Conf)
	if err != nil {
		return "error: " + errcode.Code(err) + "\n"
	}
	if r := argOr(d, "retain", ""); r != "" {
		s.minRetain, _ = strconv.Atoi(r)
	}
	sp, err := planStart(w.snapshot(), q.sourceNames(), s)
	if err != nil {
		return "error: " + errcode.Code(err) + "\n"
	}
	r := newRun(q, sp, s, &driver{})
	w.sp, w.c, w.st = sp, r.c, r.st
	w.c.Operators = int(argInt(t, d, "operators", 1))
	var out strings.Builder
	for phase := startPending; phase <= startRepartition; phase++ {
		p, err := recoveryPlan(w.c, sp, w.st, phase)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		if p == nil {
			continue
		}
		out.WriteString(stepList(p))
		if w.c.Operators > 1 && p.Kind != stream.KindRepartition {
			fmt.Fprintf(&out, "late input: at or before %d\n", p.PrevWatermark)
		}
		// The driver's report: a re-run's rows are not modelled here, so its
		// commit keeps the batch watermark; a control batch's is planned.
		wm := p.Entry.Metadata.BatchWatermarkMs
		if p.Kind == stream.KindRepartition {
			wm = p.CommitWatermark
		}
		w.st = advance(w.st, p, wm)
	}
	out.WriteString(w.state())
	return out.String()
}

// state prints the loop state.
func (w *plannerWorld) state() string {
	var cur []string
	for _, k := range sortedKeys(w.st.Current) {
		cur = append(cur, k+"="+rawOrNull(w.st.Current[k]))
	}
	tombs := sortedKeys(w.st.NewTombstones)
	return fmt.Sprintf("state: next=%d wm=%d parts=%d current=(%s) new-tombstones=(%s)\n",
		w.st.NextID, w.st.Watermark, w.st.Partitions, strings.Join(cur, ", "), strings.Join(tombs, ", "))
}

func blockOff(n string) json.RawMessage {
	if n == "null" || n == "" {
		return nil
	}
	return json.RawMessage(`{"block":` + n + `}`)
}
