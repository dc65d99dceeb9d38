package ui

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

const ckpt = "/ckpt"

func f64(v float64) *float64 { return &v }
func str(s string) *string   { return &s }

// event is a progress event as the engine writes it: batch id, run, rows per
// source (s3_backfill logOffset or eth_live block offsets).
func event(id int64, run string, rows map[string]int64, parts int64) *stream.Progress {
	ts := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Second)
	p := &stream.Progress{
		ID: "q-1", RunID: run, Name: str("eth_blocks_per_window"), Timestamp: ts.Format("2006-01-02T15:04:05.000Z"),
		BatchID: id, BatchDuration: 40 + id,
		DurationMs: map[string]int64{stream.DurTriggerExecution: 40 + id, stream.DurLatestOffset: 2, stream.DurWalCommit: 3,
			stream.DurGetBatch: 5, stream.DurAddBatch: 20, stream.DurCommitOffsets: 1},
		EventTime: map[string]string{"watermark": ts.Add(-50 * time.Hour).Format(time.RFC3339Nano), "max": ts.Add(-2 * time.Hour).Format(time.RFC3339Nano)},
		StateOperators: []stream.OperatorProgress{{OperatorName: "stateStoreSave", NumRowsTotal: 100 * id, MemoryUsedBytes: 1 << 20,
			CommitTimeMs: 4, NumShufflePartitions: parts}},
		Sink:                   stream.SinkProgress{Description: "DeltaSink[t]", NumOutputRows: 7, Metrics: map[string]string{"executionTimeMs": "6"}},
		ProcessedRowsPerSecond: f64(10),
	}
	var total int64
	for _, name := range []string{"s3_backfill", "eth_live"} {
		n, ok := rows[name]
		if !ok {
			continue
		}
		total += n
		start, end, latest := `{"logOffset":1}`, `{"logOffset":2}`, `{"logOffset":5}`
		if name == "eth_live" {
			start, end, latest = `{"block":100,"hash":"0xa"}`, `{"block":120,"hash":"0xb"}`, `{"block":150,"hash":"0xc"}`
		}
		p.Sources = append(p.Sources, stream.SourceProgress{Description: "Src[" + name + "]", Name: str(name),
			StartOffset: json.RawMessage(start), EndOffset: json.RawMessage(end), LatestOffset: json.RawMessage(latest), NumInputRows: n,
			Metrics: map[string]string{"pendingFiles": "0"}})
	}
	p.NumInputRows = total
	return p
}

func line(t *testing.T, p *stream.Progress) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func appendRaw(t *testing.T, fs vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, st.Size()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func newFS(t *testing.T) vfs.FS {
	fs := vfs.NewMem()
	if err := fs.MkdirAll(ckpt, 0o755); err != nil {
		t.Fatal(err)
	}
	return fs
}

// The tail reads whole lines only: a half-written event waits for its "\n".
// Points are derived from the events: restart marks, runs, segments.
func TestSyncTailsProgressLineByLine(t *testing.T) {
	fs := newFS(t)
	path := filepath.Join(ckpt, checkpoint.ProgressFile)
	d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
	if err := d.Sync(); err != nil {
		t.Fatalf("sync of an empty checkpoint: %v", err)
	}
	if n := len(d.Snapshot().Batches); n != 0 {
		t.Fatalf("%d batches before any event", n)
	}
	evs := []*stream.Progress{
		event(0, "run-a", map[string]int64{"s3_backfill": 500}, 200),
		event(1, "run-a", map[string]int64{"s3_backfill": 400}, 200),
		event(2, "run-b", map[string]int64{"s3_backfill": 0, "eth_live": 20}, 200),
	}
	appendRaw(t, fs, path, nil)
	all := append(append(line(t, evs[0]), line(t, evs[1])...), line(t, evs[2])...)
	cut := len(line(t, evs[0])) + len(line(t, evs[1])) + 10 // inside the third line
	appendRaw(t, fs, path, all[:cut])
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	s := d.Snapshot()
	if len(s.Batches) != 2 {
		t.Fatalf("after a torn third line: %d batches, want 2", len(s.Batches))
	}
	if s.Query.Status.State != StatusActive {
		t.Errorf("ui mode after events that came after the first read: status %q, want active", s.Query.Status.State)
	}
	appendRaw(t, fs, path, all[cut:])
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	s = d.Snapshot()
	if len(s.Batches) != 3 {
		t.Fatalf("%d batches, want 3", len(s.Batches))
	}
	// A dashboard opened on the finished history says stopped.
	late := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
	late.Sync()
	if st := late.Snapshot(); st.Query.Status.State != StatusStopped || len(st.Batches) != 3 {
		t.Errorf("ui mode on a history: status %q, %d batches", st.Query.Status.State, len(st.Batches))
	}
	for i, b := range s.Batches {
		ev := evs[i]
		if b.BatchID != ev.BatchID || b.RunID != ev.RunID || b.InputRows != ev.NumInputRows {
			t.Errorf("batch %d: %+v from %+v", i, b, ev)
		}
		var sum int64
		for _, k := range Segments {
			sum += b.Segments[k]
		}
		if sum != ev.DurationMs[stream.DurTriggerExecution] {
			t.Errorf("batch %d: segments sum to %d, triggerExecution %d", i, sum, ev.DurationMs[stream.DurTriggerExecution])
		}
		if b.Segments["stateCommit"] != ev.StateOperators[0].CommitTimeMs || b.Segments["deltaCommit"] != 6 {
			t.Errorf("batch %d: commit segments %v", i, b.Segments)
		}
		if *b.WatermarkDelayMs != (50*time.Hour).Milliseconds() || *b.EventDelayMs != (2*time.Hour).Milliseconds() {
			t.Errorf("batch %d: delays %d %d", i, *b.WatermarkDelayMs, *b.EventDelayMs)
		}
		for _, src := range ev.Sources {
			if b.SourceRows[*src.Name] != src.NumInputRows {
				t.Errorf("batch %d: rows of %s = %d, want %d", i, *src.Name, b.SourceRows[*src.Name], src.NumInputRows)
			}
		}
	}
	if s.Batches[0].Restart || s.Batches[1].Restart || !s.Batches[2].Restart {
		t.Errorf("restart marks: %v %v %v, want only the first batch of run-b", s.Batches[0].Restart, s.Batches[1].Restart, s.Batches[2].Restart)
	}
	if s.Batches[2].Run != 2 || s.Query.Runs != 2 || s.Query.RunID != "run-b" || *s.Query.LatestBatchID != 2 {
		t.Errorf("runs: batch run %d, query %+v", s.Batches[2].Run, s.Query)
	}
	// Sources table from the newest event: lag = latest - end in the offset's unit.
	want := map[string]struct {
		lag  int64
		unit string
	}{"s3_backfill": {3, "log entries"}, "eth_live": {30, "blocks"}}
	if len(s.Sources) != 2 {
		t.Fatalf("sources %+v", s.Sources)
	}
	for _, src := range s.Sources {
		w := want[src.Name]
		if src.Lag == nil || *src.Lag != w.lag || src.LagUnit != w.unit || src.Status != "active" || src.LastBatchID != 2 {
			t.Errorf("source %+v, want lag %d %s", src, w.lag, w.unit)
		}
	}
}

// A truncated or recreated progress file, or another query id, starts a new
// history instead of mixing two.
func TestSyncStartsOverOnNewHistory(t *testing.T) {
	fs := newFS(t)
	path := filepath.Join(ckpt, checkpoint.ProgressFile)
	d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
	appendRaw(t, fs, path, append(line(t, event(0, "r", map[string]int64{"eth_live": 1}, 8)), line(t, event(1, "r", map[string]int64{"eth_live": 1}, 8))...))
	d.Sync()
	gen := d.mu.gen
	if err := fs.Remove(path); err != nil {
		t.Fatal(err)
	}
	other := event(0, "r2", map[string]int64{"eth_live": 1}, 8)
	other.ID = "q-2"
	appendRaw(t, fs, path, line(t, other))
	d.Sync()
	s := d.Snapshot()
	if len(s.Batches) != 1 || s.Query.ID != "q-2" || d.mu.gen == gen {
		t.Fatalf("after recreation: %d batches, query %q, gen %d -> %d", len(s.Batches), s.Query.ID, gen, d.mu.gen)
	}
	// Same size but another query: appended events of a new id reset too.
	third := event(1, "r3", map[string]int64{"eth_live": 1}, 8)
	third.ID = "q-3"
	appendRaw(t, fs, path, line(t, third))
	d.Sync()
	if s := d.Snapshot(); len(s.Batches) != 1 || s.Query.ID != "q-3" {
		t.Fatalf("after an event of another query: %+v", s.Query)
	}
}

// An unreadable line inside the file is skipped and reported; the rest is read.
func TestSyncSkipsAndReportsBadLine(t *testing.T) {
	fs := newFS(t)
	path := filepath.Join(ckpt, checkpoint.ProgressFile)
	d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
	data := append(line(t, event(0, "r", map[string]int64{"eth_live": 1}, 8)), []byte("{\"id\":tor\n")...)
	data = append(data, line(t, event(1, "r", map[string]int64{"eth_live": 1}, 8))...)
	appendRaw(t, fs, path, data)
	err := d.Sync()
	s := d.Snapshot()
	if err == nil || len(s.Batches) != 2 || !strings.Contains(s.Query.Error, path) {
		t.Fatalf("err %v, %d batches, header error %q", err, len(s.Batches), s.Query.Error)
	}
}

func writeCheckpoint(t *testing.T, fs vfs.FS) {
	t.Helper()
	w, err := checkpoint.Lock(fs, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetadata(checkpoint.Metadata{ID: "q-1"}); err != nil {
		t.Fatal(err)
	}
	conf := func(parts string) map[string]string {
		return map[string]string{checkpoint.ConfShufflePartitions: parts, checkpoint.ConfSourceEvolution: "true"}
	}
	meta := func(parts string) checkpoint.OffsetMetadata {
		return checkpoint.OffsetMetadata{BatchTimestampMs: 1_700_000_000_000, Conf: conf(parts),
			SourceMetadataInfo: map[string]checkpoint.SourceMetadata{"eth_live": {SourceID: "eth_live", ProviderName: "ethrpc", APIVersion: "1"}}}
	}
	tomb := map[string]checkpoint.Tombstone{"s3_backfill": {RemovedInBatch: 1, LastOffset: json.RawMessage(`{"logOffset":11}`)}}
	entries := []*checkpoint.OffsetEntry{
		{Version: 2, Metadata: checkpoint.OffsetMetadata{BatchTimestampMs: 1_700_000_000_000, Conf: conf("200"),
			SourceMetadataInfo: map[string]checkpoint.SourceMetadata{"s3_backfill": {SourceID: "s3_backfill", ProviderName: "FileStreamSource", APIVersion: "1"}}},
			Sources: []checkpoint.SourceOffset{{Key: "s3_backfill", Offset: json.RawMessage(`{"logOffset":11}`)}}},
		{Version: 2, Metadata: meta("200"), Sources: []checkpoint.SourceOffset{{Key: "eth_live", Offset: nil}}},
		{Version: 2, Metadata: meta("8"), Sources: []checkpoint.SourceOffset{{Key: "eth_live", Offset: json.RawMessage(`{"block":7}`)}}},
		{Version: 2, Metadata: meta("8"), Sources: []checkpoint.SourceOffset{{Key: "eth_live", Offset: json.RawMessage(`{"block":9}`)}}},
	}
	entries[1].Metadata.Tombstones = tomb
	entries[2].Metadata.Tombstones = tomb
	entries[3].Metadata.Tombstones = tomb
	entries[2].Metadata.ControlBatchInfo = &checkpoint.ControlBatchInfo{OperationType: checkpoint.OpRepartition,
		OperationInfo: map[string]string{"from": "200", "to": "8"}}
	for i, e := range entries {
		if err := w.WriteOffsets(int64(i), e); err != nil {
			t.Fatal(err)
		}
		if i < 3 { // batch 3 stays pending
			if err := w.WriteCommit(int64(i), &checkpoint.CommitEntry{NextBatchWatermarkMs: int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The offset log view is the files as on disk: raw bytes, committed or not,
// tombstones of the newest entry, control batches, the partition count.
func TestOffsetLogView(t *testing.T) {
	fs := newFS(t)
	writeCheckpoint(t, fs)
	d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	s := d.Snapshot()
	lg := s.OffsetLog
	if lg.Error != "" || len(lg.Entries) != 4 || len(lg.Retained) != 2 || lg.Retained[0] != 0 || lg.Retained[1] != 3 || *lg.LatestCommitted != 2 {
		t.Fatalf("log %+v", lg)
	}
	dir := checkpoint.Dir{FS: fs, Path: ckpt}
	for _, e := range lg.Entries {
		raw, err := checkpoint.ReadFile(fs, dir.OffsetsPath(e.BatchID))
		if err != nil {
			t.Fatal(err)
		}
		if e.Raw != string(raw) || e.Version != 2 {
			t.Errorf("entry %d raw %q, want %q", e.BatchID, e.Raw, raw)
		}
		if e.Committed != (e.BatchID < 3) || (e.CommitRaw != "") != e.Committed {
			t.Errorf("entry %d committed %v commit %q", e.BatchID, e.Committed, e.CommitRaw)
		}
	}
	if lg.Entries[1].Sources[0].Offset != "-" || lg.Entries[1].Sources[0].Provider != "ethrpc" {
		t.Errorf("entry 1 source line %+v, want no offset yet", lg.Entries[1].Sources[0])
	}
	if len(lg.Tombstones) != 1 || lg.Tombstones[0] != (Tombstone{Name: "s3_backfill", RemovedInBatch: 1, LastOffset: `{"logOffset":11}`}) {
		t.Errorf("tombstones %+v", lg.Tombstones)
	}
	if len(lg.ControlBatches) != 1 || lg.ControlBatches[0] != (Control{BatchID: 2, Operation: checkpoint.OpRepartition, From: 200, To: 8}) {
		t.Errorf("control batches %+v", lg.ControlBatches)
	}
	if lg.Entries[2].Control == nil || lg.Entries[0].Control != nil {
		t.Errorf("control marks on entries: %+v %+v", lg.Entries[2].Control, lg.Entries[0].Control)
	}
	if s.Query.StatePartitions != 8 || s.Query.ID != "q-1" {
		t.Errorf("header %+v", s.Query)
	}
	// The removed source is a row of the sources table.
	var removed *Source
	for i := range s.Sources {
		if s.Sources[i].Name == "s3_backfill" {
			removed = &s.Sources[i]
		}
	}
	if removed == nil || removed.Status != "removed" || *removed.RemovedInBatch != 1 || removed.LastOffset != `{"logOffset":11}` {
		t.Errorf("sources %+v", s.Sources)
	}

	// Retention purges entries: the view follows.
	if err := fs.Remove(dir.OffsetsPath(0)); err != nil {
		t.Fatal(err)
	}
	d.Sync()
	if lg := d.Snapshot().OffsetLog; lg.Retained[0] != 1 || len(lg.Entries) != 3 {
		t.Errorf("after purge: %+v", lg.Retained)
	}
}

// A corrupt entry is reported with its path, never skipped silently.
func TestOffsetLogCorruptEntry(t *testing.T) {
	fs := newFS(t)
	writeCheckpoint(t, fs)
	path := filepath.Join(ckpt, checkpoint.OffsetsDir, "4")
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("v9\n{}\n"))
	f.Close()
	d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
	err = d.Sync()
	if errcode.Code(err) != errcode.CheckpointCorrupt {
		t.Fatalf("sync: %v, want %s", err, errcode.CheckpointCorrupt)
	}
	if lg := d.Snapshot().OffsetLog; !strings.Contains(lg.Error, path) {
		t.Fatalf("offset log error %q does not name %s", lg.Error, path)
	}
}

// testLayout is the demo's layout (cmd/ethstream's demoLayout).
var testLayout = DemoLayout{
	Phases:        []string{"backfill", "add_live", "retire_archive", "reuse_refused", "shrink_state", "live_reorgs"},
	OwnCheckpoint: "live_reorgs",
	Refused:       "reuse_refused",
}

// The demo observer attributes each phase's batches to it and shows the
// refused start with its code; checks decided twice appear once.
func TestDemoObserver(t *testing.T) {
	fs := newFS(t)
	path := filepath.Join(ckpt, checkpoint.ProgressFile)
	d, obs := NewDemo(ckpt, testLayout)
	d.o.FS, d.dir.FS = fs, fs
	appendRaw(t, fs, path, line(t, event(0, "stale", map[string]int64{"s3_backfill": 1}, 200)))
	d.Sync()
	if n := len(d.Snapshot().Batches); n != 0 {
		t.Fatalf("a previous demo's batches shown before the first phase: %d", n)
	}
	fs.Remove(path)
	appendRaw(t, fs, path, nil)
	run := func(name string, runID string, ids []int64, err error) {
		obs.PhaseStarted(DemoPhase{Name: name, Sources: []string{"eth_live"}, Trigger: "once"})
		if st := d.Snapshot().Query.Status.State; st != StatusActive {
			t.Errorf("%s: status %q while running", name, st)
		}
		for _, id := range ids {
			appendRaw(t, fs, path, line(t, event(id, runID, map[string]int64{"eth_live": 1}, 200)))
		}
		obs.PhaseEnded(DemoPhase{Name: name, Duration: time.Second, Err: err})
	}
	refusal := errcode.New(errcode.TombstoneNameReuse, ckpt, "pick another name", "source names 's3_backfill' were used")
	run("backfill", "r1", []int64{0, 1}, nil)
	run("add_live", "r2", []int64{2, 3, 4}, nil)
	run("reuse_refused", "", nil, refusal)
	if st := d.Snapshot().Query.Status; st.State != StatusFailed || st.Code != errcode.TombstoneNameReuse {
		t.Errorf("status after the refused start: %+v", st)
	}
	// A phase on its own checkpoint: its starts show on its card only.
	before := d.Snapshot().Query
	for i := 1; i <= 2; i++ {
		obs.PhaseStarted(DemoPhase{Name: "live_reorgs" + "#" + strconv.Itoa(i), Trigger: "reorgs"})
		obs.PhaseEnded(DemoPhase{Name: "live_reorgs" + "#" + strconv.Itoa(i), Duration: time.Second})
	}
	if q := d.Snapshot().Query; q.Status != before.Status || q.Trigger != before.Trigger {
		t.Errorf("a phase on its own checkpoint changed the header: %+v -> %+v", before, q)
	}
	obs.Checked([]Check{{Name: "5. refused", Expected: "x", Actual: "x", Result: "pass"}})
	obs.Checked([]Check{{Name: "1. ids", Expected: "a", Actual: "b", Result: "fail"}, {Name: "5. refused", Expected: "x", Actual: "x", Result: "pass"},
		{Name: "9. figure", Actual: "3", Result: "figure"}})
	obs.Finished(false, nil)
	s := d.Snapshot()
	ph := map[string]Phase{}
	for _, p := range s.Demo.Phases {
		ph[p.Name] = p
	}
	if p := ph["backfill"]; p.State != PhaseDone || *p.FirstBatch != 0 || *p.LastBatch != 1 {
		t.Errorf("backfill %+v", p)
	}
	if p := ph["add_live"]; p.State != PhaseDone || *p.FirstBatch != 2 || *p.LastBatch != 4 || p.DurationMs != 1000 {
		t.Errorf("add_live %+v", p)
	}
	if p := ph["reuse_refused"]; p.State != PhaseRefused || p.Code != errcode.TombstoneNameReuse || p.FirstBatch != nil {
		t.Errorf("reuse_refused %+v", p)
	}
	if p := ph["live_reorgs"]; p.State != PhaseDone || p.Starts != 2 || p.DurationMs != 2000 || !p.OwnCheckpoint || p.FirstBatch != nil {
		t.Errorf("live_reorgs %+v", p)
	}
	if len(s.Demo.Phases) != 6 {
		t.Errorf("%d phase cards, want 6", len(s.Demo.Phases))
	}
	if p := ph["shrink_state"]; p.State != PhasePending {
		t.Errorf("shrink_state %+v", p)
	}
	if len(s.Demo.Checks) != 3 || s.Demo.Checks[0].Name != "5. refused" || s.Demo.Checks[1].Result != "fail" || s.Demo.Checks[2].Result != "figure" {
		t.Errorf("checks %+v", s.Demo.Checks)
	}
	if s.Demo.Result != "failed" || s.Query.Status.State != StatusStopped {
		t.Errorf("result %q status %+v", s.Demo.Result, s.Query.Status)
	}
	if b := s.Batches[2]; b.Phase != "add_live" || !b.Restart {
		t.Errorf("batch 2 %+v", b)
	}
	obs.Finished(false, errors.New("boom"))
	if s := d.Snapshot(); s.Demo.Result != "error" || s.Query.Status.State != StatusFailed {
		t.Errorf("after an error: %q %+v", s.Demo.Result, s.Query.Status)
	}
}

// FuzzProgressTail: any bytes in progress.jsonl, appended in two pieces,
// never panic, and no more events are read than complete lines written.
func FuzzProgressTail(f *testing.F) {
	b, _ := json.Marshal(event(0, "r", map[string]int64{"eth_live": 3}, 8))
	f.Add(append(b, '\n'), 10)
	f.Add([]byte("{}\n{\"batchId\":1}\n\n{"), 3)
	f.Add([]byte(`{"sources":[{"name":null,"startOffset":1,"endOffset":"x"}],"eventTime":{"watermark":"bad"}}`+"\n"), 0)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		fs := vfs.NewMem()
		fs.MkdirAll(ckpt, 0o755)
		path := filepath.Join(ckpt, checkpoint.ProgressFile)
		d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
		if cut < 0 || cut > len(data) {
			cut = len(data) / 2
		}
		appendRaw(t, fs, path, data[:cut])
		d.Sync()
		appendRaw(t, fs, path, data[cut:])
		d.Sync()
		lines := strings.Count(string(data), "\n")
		if n := len(d.Snapshot().Batches); n > lines {
			t.Fatalf("%d batches from %d lines", n, lines)
		}
		if _, err := json.Marshal(d.Snapshot()); err != nil {
			t.Fatalf("state does not encode: %v", err)
		}
	})
}

// TestSyncTailsProgressSegments: the dashboard follows the progress log
// across the format 1 file and the segments a writer appends (each sync
// sees only complete lines), keeps up while the writer's retention deletes
// the oldest segments, and skips a line torn at the end of an older segment.
func TestSyncTailsProgressSegments(t *testing.T) {
	fs := newFS(t)
	appendRaw(t, fs, filepath.Join(ckpt, checkpoint.ProgressFile), line(t, event(0, "run-a", map[string]int64{"s3_backfill": 1}, 2)))
	d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
	w, err := checkpoint.Lock(fs, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 4000 // about 1.5 x ProgressRetainBytes of events with the padding below
	pad := strings.Repeat("x", 3000)
	for id := int64(1); id < n; id++ {
		ev := event(id, "run-a", map[string]int64{"s3_backfill": 1}, 2)
		ev.Sink.Metrics["pad"] = pad
		b := line(t, ev)
		if err := w.AppendProgress(b[:len(b)-1]); err != nil {
			t.Fatal(err)
		}
		if id%97 == 0 {
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A crash tore the newest segment's last line; the next writer starts a new one.
	segs, _ := w.ProgressSegments()
	appendRaw(t, fs, segs[len(segs)-1].Path, []byte(`{"id":"q-1","batchId":`))
	w.Close()
	w2, err := checkpoint.Lock(fs, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	last := line(t, event(n, "run-b", map[string]int64{"s3_backfill": 1}, 2))
	if err := w2.AppendProgress(last[:len(last)-1]); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	bs := d.Snapshot().Batches
	if len(bs) != n+1 {
		t.Fatalf("%d batches, want %d", len(bs), n+1)
	}
	for i, b := range bs {
		if b.BatchID != int64(i) {
			t.Fatalf("batch %d has id %d", i, b.BatchID)
		}
	}
	if segs, _ := w2.ProgressSegments(); segs[0].Seq < 1 {
		t.Fatalf("the retention deleted nothing: %+v", segs[0])
	}
	// A dashboard opened now sees the retained history only, in order.
	late := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
	late.Sync()
	lb := late.Snapshot().Batches
	if len(lb) == 0 || len(lb) >= n || lb[len(lb)-1].BatchID != n {
		t.Fatalf("late dashboard: %d batches, last %+v", len(lb), lb[len(lb)-1])
	}
}

// A source of the newest batch is active only while the query is: a stopped
// query (ui --checkpoint on a finished checkpoint) shows stopped sources.
func TestSourcesFollowTheQueryStatus(t *testing.T) {
	ev := event(3, "r1", map[string]int64{"eth_live": 5}, 8)
	for query, want := range map[string]string{StatusActive: "active", StatusStopped: "stopped", StatusFailed: "failed",
		StatusStarting: "stopped", "": "stopped"} {
		srcs := sources(ev, nil, query)
		if len(srcs) == 0 {
			t.Fatal("no source")
		}
		for _, s := range srcs {
			if s.Status != want {
				t.Errorf("query %q: source %s is %q, want %q", query, s.Name, s.Status, want)
			}
		}
	}
}

// The batch's freshness is the largest freshnessMs its sources report;
// without one, none.
func TestBatchFreshness(t *testing.T) {
	ev := event(3, "r1", map[string]int64{"s3_backfill": 2, "eth_live": 5}, 8)
	if b := point(ev, "", 1, ""); b.FreshnessMs != nil {
		t.Fatalf("freshness %d without a source reporting it", *b.FreshnessMs)
	}
	ev.Sources[0].Metrics[stream.MetricFreshnessMs] = "7"
	ev.Sources[1].Metrics[stream.MetricFreshnessMs] = "31"
	if b := point(ev, "", 1, ""); b.FreshnessMs == nil || *b.FreshnessMs != 31 {
		t.Fatalf("freshness %v, want 31", b.FreshnessMs)
	}
}

// TestTriggerFromTheCheckpoint: ui --checkpoint shows the trigger the
// checkpoint records (the newest query shape's), where it said "not
// recorded"; a command that knows its trigger keeps it.
func TestTriggerFromTheCheckpoint(t *testing.T) {
	fs := newFS(t)
	d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeUI})
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if tr := d.Snapshot().Query.Trigger; tr != "" {
		t.Fatalf("trigger %q before any shape", tr)
	}
	for seq, tr := range []string{"availableNow", "processingTime=50ms"} {
		if err := shape.Write(fs, ckpt, int64(seq), shape.Record{FirstBatchID: int64(seq * 13), Shape: shape.Shape{Trigger: tr}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if tr := d.Snapshot().Query.Trigger; tr != "processingTime=50ms" {
		t.Errorf("ui mode: trigger %q, want the newest shape's", tr)
	}
	run := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeRun, Trigger: "once"})
	if err := run.Sync(); err != nil {
		t.Fatal(err)
	}
	if tr := run.Snapshot().Query.Trigger; tr != "once" {
		t.Errorf("run mode: trigger %q, want its own", tr)
	}
}
