package engine

import (
	"strings"
	"testing"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
)

func baseShape() shape.Shape {
	return shape.Shape{
		Sources: []shape.Source{
			{Name: "s3_backfill", Provider: "s3archive", Location: "s3://b/v1.0/eth/blocks", Options: "maxFilesPerTrigger=2"},
			{Name: "eth_live", Provider: "ethrpc", Location: "http://127.0.0.1:8545", Options: "maxBlocksPerTrigger=20"},
		},
		From:       "blocks",
		Projection: []string{"window(block_ts, '5 minutes') as window", "source", "miner", "count(*) as count"},
		Columns:    []string{"block_ts", "source", "miner"},
		Window:     &shape.Window{Column: "block_ts", Size: "5 minutes"},
		Watermark:  &shape.Watermark{Column: "block_ts", DelayUs: 48 * 3600 * 1e6},
		Keys:       []string{"source", "miner"},
		Aggregates: []string{"count(*) as count"},
		OutputMode: "update", OutputSchema: "window_start timestamp, ..., count int64", StateSchema: "stateStoreSave ... count(*):count",
		Sink: shape.Sink{Format: "delta", Location: "/t"}, Trigger: "available-now",
	}
}

// TestRestartRules is the rule table: each change on its own, whether the
// start may go on, the code of a refusal and the first batch an allowed
// change applies to.
func TestRestartRules(t *testing.T) {
	sp := &startPlan{NextID: 10, PendingID: -1}
	pending := &startPlan{NextID: 10, PendingID: 9, Pending: &checkpoint.OffsetEntry{}}
	for _, tc := range []struct {
		name    string
		change  func(s *shape.Shape)
		sp      *startPlan
		code    string // "" = allowed
		changes string // the Change names, comma-separated
		first   int64
		warn    string
	}{
		{name: "no change", change: func(*shape.Shape) {}, changes: ""},
		{name: "add a filter", change: func(s *shape.Shape) { s.Filter = "(gas_used > 0)"; s.Columns = append(s.Columns, "gas_used") },
			changes: "filter,columns read", first: 10, warn: "applies from batch 10"},
		{name: "change a filter with a pending batch", change: func(s *shape.Shape) { s.Filter = "(gas_used > 0)" }, sp: pending,
			changes: "filter", first: 9, warn: "re-runs first with the same data"},
		{name: "read limit", change: func(s *shape.Shape) { s.Sources[0].Options = "maxFilesPerTrigger=5" }, sp: pending,
			changes: "source s3_backfill options", first: 10},
		{name: "trigger", change: func(s *shape.Shape) { s.Trigger = "processing-time=2s" }, changes: "trigger", first: 10},
		{name: "projection, same schema", change: func(s *shape.Shape) { s.Projection[1], s.Projection[2] = s.Projection[2], s.Projection[1] },
			changes: "projection", first: 10},
		{name: "projection, another schema", change: func(s *shape.Shape) {
			s.Aggregates = []string{"count(*) as blocks"}
			s.OutputSchema, s.StateSchema = "... blocks int64", "... count(*):blocks"
		}, code: errcode.OutputSchemaMismatch, changes: "output schema"},
		{name: "add a source", change: func(s *shape.Shape) {
			s.Sources = append(s.Sources, shape.Source{Name: "eth_live2", Provider: "ethrpc", Location: "http://h"})
		}, changes: "source added", first: 10},
		{name: "remove a source", change: func(s *shape.Shape) { s.Sources = s.Sources[:1] }, changes: "source removed", first: 10},
		{name: "source provider", change: func(s *shape.Shape) { s.Sources[1].Provider = "s3archive" },
			code: errcode.SourceProviderChanged, changes: "source eth_live provider"},
		{name: "source location", change: func(s *shape.Shape) { s.Sources[0].Location = "s3://other/v1.0/eth/blocks" },
			code: errcode.SourceLocationChanged, changes: "source s3_backfill location"},
		{name: "sink location", change: func(s *shape.Shape) { s.Sink.Location = "/t2" }, code: errcode.SinkLocationChanged, changes: "sink location"},
		{name: "group keys", change: func(s *shape.Shape) { s.Keys = []string{"miner"}; s.StateSchema = "other" },
			code: errcode.StateSchemaMismatch, changes: "group keys"},
		{name: "aggregates", change: func(s *shape.Shape) { s.Aggregates = append(s.Aggregates, "sum(gas_used) as sum_gas_used") },
			code: errcode.StateSchemaMismatch, changes: "aggregates"},
		{name: "aggregation column", change: func(s *shape.Shape) { s.Aggregates = []string{"sum(size) as count"} },
			code: errcode.StateSchemaMismatch, changes: "aggregates"},
		{name: "window", change: func(s *shape.Shape) { s.Window.Size = "10 minutes" }, code: errcode.StateSchemaMismatch, changes: "window"},
		{name: "watermark delay up", change: func(s *shape.Shape) { s.Watermark.DelayUs *= 2 },
			code: errcode.WatermarkDelayIncreased, changes: "watermark delay increased"},
		{name: "watermark delay down", change: func(s *shape.Shape) { s.Watermark.DelayUs /= 2 }, sp: pending,
			changes: "watermark delay decreased", first: 10, warn: "from batch 10 on"},
		{name: "watermark removed", change: func(s *shape.Shape) { s.Watermark = nil }, code: errcode.WatermarkChanged, changes: "watermark"},
		{name: "output mode update -> complete", change: func(s *shape.Shape) { s.OutputMode = "complete" }, changes: "output mode", first: 10, warn: "output mode changed"},
		{name: "output mode update -> append", change: func(s *shape.Shape) { s.OutputMode = "append" }, code: errcode.OutputModeChanged, changes: "output mode"},
		{name: "two refusals, first one reported", change: func(s *shape.Shape) { s.Sink.Location = "/t2"; s.Watermark.DelayUs *= 2 },
			code: errcode.SinkLocationChanged, changes: "sink location,watermark delay increased"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.sp
			if p == nil {
				p = sp
			}
			rec := &shape.Record{Seq: 3, Shape: baseShape()}
			cur := baseShape()
			tc.change(&cur)
			d, err := decideShape("/ck", rec, &cur, p, true, sinkSeen{}, nil)
			var names []string
			for _, c := range d.Changes {
				names = append(names, c.Change)
				if c.Allowed != (c.Code == "") || c.SparkRule == "" || c.Rule == "" {
					t.Errorf("change %+v: inconsistent", c)
				}
				if c.Allowed && tc.code == "" && c.FirstBatchID != tc.first {
					t.Errorf("%s applies from batch %d, want %d", c.Change, c.FirstBatchID, tc.first)
				}
			}
			if got := strings.Join(names, ","); got != tc.changes {
				t.Errorf("changes %q, want %q", got, tc.changes)
			}
			if errcode.Code(err) != tc.code {
				t.Fatalf("error %v, want code %q", err, tc.code)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "/ck") || !strings.Contains(err.Error(), "To fix:") {
					t.Errorf("refusal lacks the checkpoint or a remedy: %v", err)
				}
				if d.Write {
					t.Error("a refused start would write a shape")
				}
				return
			}
			if d.Write != (tc.changes != "") || (d.Write && d.Seq != 4) {
				t.Errorf("write %v seq %d", d.Write, d.Seq)
			}
			if tc.warn != "" && !strings.Contains(strings.Join(d.Warnings, "\n"), tc.warn) {
				t.Errorf("warnings %q lack %q", d.Warnings, tc.warn)
			}
		})
	}
}

func TestRestartRulesPositional(t *testing.T) {
	rec := &shape.Record{Shape: baseShape()}
	cur := baseShape()
	for i := range cur.Sources {
		cur.Sources[i].Name, rec.Shape.Sources[i].Name = "", ""
	}
	cur.Sources[0].Provider = "ethrpc"
	_, err := decideShape("/ck", rec, &cur, &startPlan{NextID: 1, PendingID: -1}, false, sinkSeen{}, nil)
	if errcode.Code(err) != errcode.SourceProviderChanged || !strings.Contains(err.Error(), "new checkpoint") {
		t.Fatalf("positional provider change: %v", err)
	}
}

func TestRestartRulesFirstRecord(t *testing.T) {
	cur := baseShape()
	d, err := decideShape("/ck", nil, &cur, &startPlan{NextID: 5, PendingID: -1}, true, sinkSeen{}, nil)
	if err != nil || !d.Write || d.Seq != 0 || d.FirstBatchID != 5 || len(d.Warnings) != 1 {
		t.Fatalf("legacy checkpoint: %+v %v", d, err)
	}
	d, err = decideShape("/ck", nil, &cur, &startPlan{New: true, PendingID: -1}, true, sinkSeen{}, nil)
	if err != nil || !d.Write || len(d.Warnings) != 0 {
		t.Fatalf("new checkpoint: %+v %v", d, err)
	}
	d, err = decideShape("/ck", nil, nil, &startPlan{New: true}, true, sinkSeen{}, nil)
	if err != nil || d.Write {
		t.Fatalf("no shape: %+v %v", d, err)
	}
}

// TestSinkIdentityRules decides the sink rule from the recorded sink and
// what the start read at the location the query names.
func TestSinkIdentityRules(t *testing.T) {
	ours := map[string]int64{"q": 9}
	for _, tc := range []struct {
		name        string
		oldID, loc  string
		seen        sinkSeen
		code        string
		write, move bool
	}{
		{name: "same table, same place", oldID: "A", loc: "/t", seen: sinkSeen{Exists: true, ID: "A", Batches: ours}},
		{name: "same table moved", oldID: "A", loc: "s3://b/t", seen: sinkSeen{Exists: true, ID: "A", Batches: ours}, write: true, move: true},
		{name: "another table moved in", oldID: "A", loc: "/t", seen: sinkSeen{Exists: true, ID: "B", Batches: ours}, code: errcode.SinkTableMismatch},
		{name: "another table elsewhere", oldID: "A", loc: "/u", seen: sinkSeen{Exists: true, ID: "B"}, code: errcode.SinkTableMismatch},
		{name: "no table elsewhere", oldID: "A", loc: "/u", code: errcode.SinkLocationChanged},
		{name: "no table here (deleted)", oldID: "A", loc: "/t", write: true},
		{name: "old record, our txn elsewhere", loc: "/u", seen: sinkSeen{Exists: true, ID: "C", Batches: ours}, write: true, move: true},
		{name: "old record, no txn of ours elsewhere", loc: "/u", seen: sinkSeen{Exists: true, ID: "C", Batches: map[string]int64{"other": 3}}, code: errcode.SinkTableMismatch},
		{name: "old record, id first seen here", loc: "/t", seen: sinkSeen{Exists: true, ID: "C", Batches: ours}, write: true},
		{name: "unreadable table: decided later", oldID: "A", loc: "/u", seen: sinkSeen{Err: errcode.New(errcode.CheckpointCorrupt, "/u", "", "x")}, write: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &shape.Record{Seq: 1, Shape: baseShape()}
			rec.Shape.Sink.ID = tc.oldID
			cur := baseShape()
			cur.Sink.Location = tc.loc
			d, err := decideShape("/ck", rec, &cur, &startPlan{QueryID: "q", NextID: 10, PendingID: -1}, true, tc.seen, nil)
			if errcode.Code(err) != tc.code {
				t.Fatalf("err %v, want code %q", err, tc.code)
			}
			if err != nil {
				if tc.code == errcode.SinkTableMismatch && tc.seen.ID != "" && tc.oldID != "" && (!strings.Contains(err.Error(), tc.oldID) || !strings.Contains(err.Error(), tc.seen.ID)) {
					t.Fatalf("refusal does not name both ids: %v", err)
				}
				return
			}
			moved := false
			for _, c := range d.Changes {
				moved = moved || (c.Change == "sink location" && c.Allowed)
			}
			if d.Write != tc.write || moved != tc.move || d.Shape.Sink.ID != tc.seen.ID {
				t.Fatalf("write %v moved %v id %q; want %v %v %q", d.Write, moved, d.Shape.Sink.ID, tc.write, tc.move, tc.seen.ID)
			}
		})
	}
}

// TestRestartRulesMovedSource: a location change is allowed only for the
// key whose move the source admitted from exactly the recorded location;
// the new shape (recorded by the start) carries the new location.
func TestRestartRulesMovedSource(t *testing.T) {
	rec := &shape.Record{Shape: baseShape()}
	cur := baseShape()
	cur.Sources[0].Location = "s3://mirror/v1.0/eth/blocks"
	sp := &startPlan{NextID: 4, PendingID: -1}
	for _, tc := range []struct {
		name  string
		moved map[string]string
		ok    bool
	}{
		{"not told", nil, false},
		{"told of another old location", map[string]string{"s3_backfill": "s3://other/v1.0/eth/blocks"}, false},
		{"told for another source", map[string]string{"eth_live": "s3://b/v1.0/eth/blocks"}, false},
		{"admitted", map[string]string{"s3_backfill": "s3://b/v1.0/eth/blocks"}, true},
	} {
		d, err := decideShape("/ck", rec, &cur, sp, true, sinkSeen{}, tc.moved)
		if !tc.ok {
			if errcode.Code(err) != errcode.SourceLocationChanged || !strings.Contains(err.Error(), "movedFrom=s3://b/v1.0/eth/blocks") {
				t.Errorf("%s: %v, want SOURCE_LOCATION_CHANGED naming movedFrom", tc.name, err)
			}
			continue
		}
		if err != nil || !d.Write || len(d.Changes) != 1 || d.Changes[0].Change != "source s3_backfill location" || d.Changes[0].FirstBatchID != 4 ||
			d.Shape.Sources[0].Location != "s3://mirror/v1.0/eth/blocks" {
			t.Errorf("%s: %+v %v", tc.name, d, err)
		}
	}
	// A source that cannot check a move (no stream.MoveChecker: the live
	// source) is not told to pass movedFrom, an option it does not know.
	_, err := decideShape("/ck", rec, &cur, sp, true, sinkSeen{}, map[string]string{"s3_backfill": ""})
	if errcode.Code(err) != errcode.SourceLocationChanged || strings.Contains(err.Error(), "movedFrom") ||
		!strings.Contains(err.Error(), "To fix: give the source at the new location a new name (the old one is tombstoned), or start a new checkpoint") {
		t.Errorf("a source that cannot move: %v", err)
	}
}

// TestSinkRestartRules: the sink rows of the restart-compatibility table.
// A change of sink (Delta table -> file sink) and a file sink's new output
// directory are refused (Spark: "changes to output directory of a file
// sink are not allowed"); a Delta table is recognised by its id (see
// sink_identity); the file sink's output mode is its own check (append
// only, refused when the query is built).
func TestSinkRestartRules(t *testing.T) {
	sp := &startPlan{NextID: 10, PendingID: -1}
	file := func() shape.Shape {
		s := baseShape()
		s.OutputMode, s.Sink = "append", shape.Sink{Format: "parquet", Location: "/out"}
		return s
	}
	for _, tc := range []struct {
		name     string
		old, cur func() shape.Shape
		seen     sinkSeen
		change   string
		code     string
		msg      string
	}{
		{name: "delta to file sink", old: baseShape, cur: file, change: "sink format,output mode", code: errcode.SinkLocationChanged, msg: "changed from delta:/t to parquet:/out"},
		{name: "file sink directory", old: file, cur: func() shape.Shape { s := file(); s.Sink.Location = "/out2"; return s },
			change: "sink location", code: errcode.SinkLocationChanged, msg: "output directory changed from /out to /out2"},
		{name: "file sink unchanged", old: file, cur: file},
		{name: "delta table moved, recognised by id", old: func() shape.Shape { s := baseShape(); s.Sink.ID = "id-1"; return s },
			cur:  func() shape.Shape { s := baseShape(); s.Sink.Location = "/t2"; return s },
			seen: sinkSeen{Exists: true, Recording: true, ID: "id-1"}, change: "sink location"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := tc.cur()
			d, err := decideShape("/ck", &shape.Record{Seq: 1, Shape: tc.old()}, &cur, sp, true, tc.seen, nil)
			var names []string
			for _, c := range d.Changes {
				names = append(names, c.Change)
			}
			if got := strings.Join(names, ","); got != tc.change {
				t.Errorf("changes %q, want %q", got, tc.change)
			}
			if errcode.Code(err) != tc.code || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("error %v, want code %q saying %q", err, tc.code, tc.msg)
			}
		})
	}
}
