package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// Modes of Options.Mode.
const (
	ModeRun  = "run"
	ModeDemo = "demo"
	ModeUI   = "ui"
)

// DefaultPoll is how often the checkpoint is re-read when nothing pokes the
// dashboard: often enough that a batch appears within a blink, rare enough
// that a stat and a directory listing per tick cost nothing.
const DefaultPoll = 200 * time.Millisecond

// logEntries is how many of the newest offsets entries the dashboard shows.
const logEntries = 8

// MaxBatches bounds the batches kept in memory (the oldest are dropped): a
// long-running query must not grow the dashboard without limit.
const MaxBatches = 20000

// Options configure a Dashboard.
type Options struct {
	Checkpoint string
	FS         vfs.FS // nil = vfs.Default
	Mode       string // ModeRun, ModeDemo or ModeUI
	Trigger    string // shown in the header; "" = unknown
	Poll       time.Duration
	Now        func() time.Time // nil = time.Now
}

// Dashboard follows one checkpoint: it tails its progress log and reads
// the offsets and commits logs, read-only, so it works the same for a query
// in this process, in a child process (the demo's phases) or one that
// finished long ago. Its methods are safe for concurrent use.
type Dashboard struct {
	o   Options
	dir checkpoint.Dir

	poke chan struct{} // a progress event arrived: read now

	mu struct {
		sync.Mutex
		gen         int // bumped when the history restarts (a new checkpoint)
		metaVer     int // bumped when Meta changes
		wake        chan struct{}
		closed      bool
		query       Query
		batches     []Batch
		dropped     int // batches dropped from the front (MaxBatches)
		runs        map[string]int
		runPhase    map[string]string
		phase       string // demo phase running now
		lastRun     string
		last        *stream.Progress
		detail      map[int64]*stream.Progress // the newest maxDetail events by batch id (BatchDetail)
		detailOrder []int64
		log         OffsetLog
		latest      *checkpoint.OffsetEntry
		demo        *Demo
		tail        tail
		cache       map[int64]cachedEntry
		ingested    int // events read in the current generation
		skipNote    string
		demoStarted bool
		synced      bool // the first read is done: later events are new
	}
}

type cachedEntry struct {
	e   *checkpoint.OffsetEntry
	raw []byte
}

// tail is the read position in the progress log: offset off of segment
// seq (checkpoint.ProgressSegment.Seq), once read is set.
type tail struct {
	seq  int64
	off  int64
	read bool
}

// New returns a dashboard of o.Checkpoint. Nothing is read until Sync.
func New(o Options) *Dashboard {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	d := &Dashboard{o: o, dir: checkpoint.Dir{FS: o.FS, Path: o.Checkpoint}, poke: make(chan struct{}, 1)}
	d.mu.wake = make(chan struct{})
	d.mu.query = Query{Mode: o.Mode, Checkpoint: o.Checkpoint, Trigger: o.Trigger,
		Status: Status{State: StatusStarting, Since: d.now()}}
	if o.Mode == ModeUI {
		d.mu.query.Status = Status{State: StatusStopped, Since: d.now()}
	}
	d.resetLocked()
	return d
}

func (d *Dashboard) now() string { return d.o.Now().UTC().Format(time.RFC3339) }

// resetLocked forgets the history (a new checkpoint at the same path).
func (d *Dashboard) resetLocked() {
	d.mu.gen++
	d.mu.batches = nil
	d.mu.dropped = 0
	d.mu.runs = map[string]int{}
	d.mu.runPhase = map[string]string{}
	d.mu.lastRun = ""
	d.mu.last = nil
	d.mu.detail, d.mu.detailOrder = map[int64]*stream.Progress{}, nil
	d.mu.latest = nil
	d.mu.log = OffsetLog{Dir: d.dir.Join(checkpoint.OffsetsDir), Retained: []int64{}, Entries: []LogEntry{},
		Tombstones: []Tombstone{}, ControlBatches: []Control{}}
	d.mu.tail = tail{}
	d.mu.cache = map[int64]cachedEntry{}
	d.mu.ingested = 0
	d.mu.skipNote = ""
	d.mu.query.Error = ""
	d.mu.query.ID, d.mu.query.Name, d.mu.query.RunID, d.mu.query.Runs = "", "", "", 0
	d.mu.query.LatestBatchID, d.mu.query.Watermark, d.mu.query.StatePartitions = nil, "", 0
	d.changedLocked()
}

// changedLocked wakes every event stream.
func (d *Dashboard) changedLocked() {
	d.mu.metaVer++
	close(d.mu.wake)
	d.mu.wake = make(chan struct{})
}

// OnProgress makes Dashboard an engine.Listener: the event is already in
// the progress log (the engine appends before it calls listeners), so it only
// asks for an immediate read instead of waiting for the next poll, and never
// blocks the query.
func (d *Dashboard) OnProgress(*stream.Progress) {
	select {
	case d.poke <- struct{}{}:
	default:
	}
}

// SetStatus sets the header status and, if trigger is not "", the trigger.
func (d *Dashboard) SetStatus(st Status, trigger string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st.Since == "" {
		st.Since = d.now()
	}
	d.mu.query.Status = st
	if trigger != "" {
		d.mu.query.Trigger = trigger
	}
	d.changedLocked()
}

// Started marks the query active under trigger.
func (d *Dashboard) Started(trigger string) {
	d.SetStatus(Status{State: StatusActive}, trigger)
}

// Finished marks the query stopped, or failed with err's code, after a final read.
func (d *Dashboard) Finished(err error) {
	d.Sync()
	d.SetStatus(StatusOf(err, d.o.Now()), "")
}

// Snapshot returns a copy of the whole state.
func (d *Dashboard) Snapshot() State {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.metaLocked()
	return State{Version: APIVersion, Query: m.Query, Batches: append([]Batch{}, d.mu.batches...),
		Sources: m.Sources, OffsetLog: m.OffsetLog, Demo: m.Demo}
}

func (d *Dashboard) metaLocked() Meta {
	m := Meta{Query: d.mu.query, Sources: sources(d.mu.last, d.mu.latest, d.mu.query.Status.State), OffsetLog: d.mu.log}
	if d.mu.demo != nil {
		dm := *d.mu.demo
		dm.Phases = append([]Phase{}, dm.Phases...)
		dm.Checks = append([]Check{}, dm.Checks...)
		for i := range dm.Phases {
			d.phaseBatchesLocked(&dm.Phases[i])
		}
		m.Demo = &dm
	}
	return m
}

func (d *Dashboard) phaseBatchesLocked(p *Phase) {
	for _, b := range d.mu.batches {
		if b.Phase != p.Name {
			continue
		}
		id := b.BatchID
		if p.FirstBatch == nil {
			p.FirstBatch = &id
		}
		p.LastBatch = &id
	}
}

// Sync reads what is new in the checkpoint: appended progress events and the
// offsets and commits logs. A file it cannot read is reported in the state
// (Query.Error, OffsetLog.Error), not returned, except for the first error,
// which is also returned for the caller to log.
func (d *Dashboard) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.o.Mode == ModeDemo && !d.mu.demoStarted {
		// The demo clears the checkpoint of a previous run before its first
		// phase: reading it now would show that old run.
		return nil
	}
	perr := d.syncProgressLocked()
	lerr := d.syncLogLocked()
	serr := d.syncTriggerLocked()
	d.mu.synced = true
	return errors.Join(perr, lerr, serr)
}

// syncTriggerLocked shows, where no command told the dashboard its trigger
// (ui --checkpoint), the trigger the checkpoint records: the newest query
// shape's (shape/<n>), the trigger of the last start that ran.
func (d *Dashboard) syncTriggerLocked() error {
	if d.o.Mode != ModeUI || d.o.Trigger != "" {
		return nil
	}
	rec, err := shape.ReadLatest(d.o.FS, d.o.Checkpoint)
	if err != nil || rec == nil || rec.Shape.Trigger == "" {
		return err
	}
	if d.mu.query.Trigger != rec.Shape.Trigger {
		d.mu.query.Trigger = rec.Shape.Trigger
		d.changedLocked()
	}
	return nil
}

// syncProgressLocked reads the complete lines appended to the checkpoint's
// progress log (package checkpoint, "progress/": the format 1 file, then
// the segments) since the last call. A line without its "\n" at the end of
// the newest segment is being written and is left for the next call; at the
// end of an older one it was torn by a crash and is skipped. Segments the
// writer's retention deleted before they were read are skipped.
func (d *Dashboard) syncProgressLocked() error {
	segs, err := d.dir.ProgressSegments()
	if err != nil {
		return d.progressErrLocked(err, nil)
	}
	t := &d.mu.tail
	if len(segs) == 0 {
		if t.read {
			d.resetLocked() // the log is gone: a new history
		}
		return d.progressErrLocked(nil, nil)
	}
	i := 0
	if t.read {
		i = -1
		for j, sg := range segs {
			if sg.Seq >= t.seq {
				i = j
				break
			}
		}
		switch {
		case i < 0 || segs[i].Seq == t.seq && segs[i].Size < t.off:
			d.resetLocked() // truncated, replaced or recreated: a new history
			i = 0
		case segs[i].Seq != t.seq:
			t.seq, t.off = segs[i].Seq, 0
		}
	}
	var bad error
	changed := false
	for ; i < len(segs); i++ {
		sg := segs[i]
		if !t.read || t.seq != sg.Seq {
			t.seq, t.off, t.read = sg.Seq, 0, true
		}
		last := i == len(segs)-1
		if sg.Size > t.off {
			n, skipped, err := d.readSegmentLocked(sg.Path, t.off, sg.Size)
			if err != nil {
				return d.progressErrLocked(err, bad)
			}
			if skipped != nil {
				bad = skipped
			}
			if n > 0 {
				changed = true
			}
			t.off += n
		}
		if !last {
			// A segment is complete once a newer one exists: a partial
			// line left in it was torn by a crash.
			t.seq, t.off = segs[i+1].Seq, 0
		}
	}
	if changed {
		d.changedLocked()
	}
	return d.progressErrLocked(nil, bad)
}

// readSegmentLocked ingests the complete lines of path in [off, size) and
// returns the bytes they took.
func (d *Dashboard) readSegmentLocked(path string, off, size int64) (consumed int64, skipped, err error) {
	f, err := d.o.FS.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil // deleted by the writer's retention since the listing
	}
	if err != nil {
		return 0, nil, fmt.Errorf("open progress log %s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, size-off)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, fmt.Errorf("read progress log %s: %w", path, err)
	}
	buf = buf[:n]
	c := 0
	for {
		i := bytes.IndexByte(buf[c:], '\n')
		if i < 0 {
			break
		}
		line := buf[c : c+i]
		c += i + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		p := new(stream.Progress)
		if err := json.Unmarshal(line, p); err != nil {
			// A torn line inside the file (a crash mid-append, then more
			// appends) is skipped as the engine's reader skips a torn tail.
			skipped = fmt.Errorf("progress log %s: skipped an unreadable event after %d events: %v", path, d.mu.ingested, err)
			continue
		}
		d.ingestLocked(p)
	}
	return int64(c), skipped, nil
}

// progressErrLocked records the outcome of a read of the progress log in the
// header: a read error lasts until a read succeeds, a skipped line until the
// history resets.
func (d *Dashboard) progressErrLocked(readErr, skipped error) error {
	if skipped != nil {
		d.mu.skipNote = skipped.Error()
	}
	msg := d.mu.skipNote
	if readErr != nil {
		msg = readErr.Error()
	}
	if msg != d.mu.query.Error {
		d.mu.query.Error = msg
		d.changedLocked()
	}
	return errors.Join(readErr, skipped)
}

// maxDetail bounds the batches whose whole progress event is kept for the
// per-batch page: a long-running query's page shows the recent ones.
const maxDetail = 2000

// BatchDetail is the whole progress event of a batch (offsets per source,
// durations, state operators, sink metrics), as the query reported it; ok is
// false for a batch not seen or no longer kept (the newest maxDetail are).
func (d *Dashboard) BatchDetail(id int64) (p stream.Progress, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.mu.detail[id]
	if !ok {
		return stream.Progress{}, false
	}
	return *e, true
}

func (d *Dashboard) keepDetailLocked(p *stream.Progress) {
	if d.mu.detail == nil {
		d.mu.detail = map[int64]*stream.Progress{}
	}
	if _, ok := d.mu.detail[p.BatchID]; !ok {
		d.mu.detailOrder = append(d.mu.detailOrder, p.BatchID)
	}
	d.mu.detail[p.BatchID] = p // a re-run batch: its newest report
	if len(d.mu.detailOrder) > maxDetail {
		delete(d.mu.detail, d.mu.detailOrder[0])
		d.mu.detailOrder = d.mu.detailOrder[1:]
	}
}

func (d *Dashboard) ingestLocked(p *stream.Progress) {
	d.mu.ingested++
	if d.mu.query.ID != "" && p.ID != d.mu.query.ID {
		// Another query's history in the same file: the checkpoint was recreated.
		d.resetLocked()
		d.mu.ingested = 1
	}
	run, ok := d.mu.runs[p.RunID]
	if !ok {
		run = len(d.mu.runs) + 1
		d.mu.runs[p.RunID] = run
		d.mu.runPhase[p.RunID] = d.mu.phase
	}
	b := point(p, d.mu.lastRun, run, d.mu.runPhase[p.RunID])
	d.mu.batches = append(d.mu.batches, b)
	if len(d.mu.batches) > MaxBatches {
		n := len(d.mu.batches) - MaxBatches
		d.mu.batches = append([]Batch(nil), d.mu.batches[n:]...)
		d.mu.dropped += n
	}
	d.mu.lastRun = p.RunID
	d.mu.last = p
	d.keepDetailLocked(p)
	q := &d.mu.query
	q.ID, q.RunID, q.Runs = p.ID, p.RunID, len(d.mu.runs)
	if p.Name != nil {
		q.Name = *p.Name
	}
	id := p.BatchID
	q.LatestBatchID = &id
	q.Watermark = b.Watermark
	if b.Partitions > 0 {
		q.StatePartitions = int(b.Partitions)
	}
	if d.o.Mode == ModeUI && d.mu.synced && d.mu.query.Status.State != StatusActive {
		// New events after the first read: the query is running elsewhere.
		q.Status = Status{State: StatusActive, Since: d.now(), Message: "batches are arriving from another process"}
	}
}

// syncLogLocked reads offsets/ and commits/: the newest entries, the
// tombstones and control batches. Entries are immutable once published, so
// each is read once and kept until retention deletes it.
func (d *Dashboard) syncLogLocked() error {
	before, _ := json.Marshal(d.mu.log)
	err := d.readLogLocked()
	if err != nil {
		d.mu.log.Error = err.Error()
	} else {
		d.mu.log.Error = ""
	}
	after, _ := json.Marshal(d.mu.log)
	if !bytes.Equal(before, after) {
		d.changedLocked()
	}
	return err
}

// cacheOffsetsLocked reads and parses the offsets entries of ids not yet
// cached, and drops the cached entries no longer listed (purged).
func (d *Dashboard) cacheOffsetsLocked(ids []int64) error {
	keep := make(map[int64]bool, len(ids))
	for _, id := range ids {
		keep[id] = true
		if _, ok := d.mu.cache[id]; ok {
			continue
		}
		path := d.dir.OffsetsPath(id)
		raw, err := checkpoint.ReadFile(d.o.FS, path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // purged between the listing and the read
			}
			return fmt.Errorf("read offsets entry %s: %w", path, err)
		}
		e, err := checkpoint.ParseOffsets(path, raw)
		if err != nil {
			return err
		}
		d.mu.cache[id] = cachedEntry{e: e, raw: raw}
	}
	for id := range d.mu.cache {
		if !keep[id] {
			delete(d.mu.cache, id)
		}
	}
	return nil
}

// logEntriesLocked is the page's view of the newest logEntries offsets
// entries, each with its commit when it has one.
func (d *Dashboard) logEntriesLocked(ids []int64, committed map[int64]bool) []LogEntry {
	entries := []LogEntry{}
	for _, id := range ids[max(0, len(ids)-logEntries):] {
		ce, ok := d.mu.cache[id]
		if !ok {
			continue
		}
		le := logEntry(id, ce.e, ce.raw)
		if committed[id] {
			le.Committed = true
			if raw, err := checkpoint.ReadFile(d.o.FS, d.dir.CommitPath(id)); err == nil {
				le.CommitRaw = string(raw)
			}
		}
		entries = append(entries, le)
	}
	return entries
}

func (d *Dashboard) readLogLocked() error {
	ids, err := d.dir.ListOffsets()
	if err != nil {
		return err
	}
	commits, err := d.dir.ListCommits()
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		d.mu.log.Retained, d.mu.log.Entries, d.mu.log.Tombstones, d.mu.log.ControlBatches = []int64{}, []LogEntry{}, []Tombstone{}, []Control{}
		d.mu.log.LatestCommitted = nil
		d.mu.latest = nil
		return nil
	}
	m, ok, err := d.dir.ReadMetadata()
	if err != nil {
		return err
	}
	if ok && d.mu.query.ID != "" && m.ID != d.mu.query.ID {
		d.resetLocked() // the checkpoint was recreated under the same path
		return nil
	}
	if ok && d.mu.query.ID == "" {
		d.mu.query.ID = m.ID
	}
	if err := d.cacheOffsetsLocked(ids); err != nil {
		return err
	}
	committed := make(map[int64]bool, len(commits))
	for _, c := range commits {
		committed[c] = true
	}
	lg := &d.mu.log
	lg.Retained = []int64{ids[0], ids[len(ids)-1]}
	lg.LatestCommitted = nil
	if len(commits) > 0 {
		c := commits[len(commits)-1]
		lg.LatestCommitted = &c
	}
	lg.ControlBatches = []Control{}
	for _, id := range ids {
		if ce, ok := d.mu.cache[id]; ok {
			if from, to, ok := ce.e.IsRepartition(); ok {
				lg.ControlBatches = append(lg.ControlBatches, Control{BatchID: id, Operation: checkpoint.OpRepartition, From: from, To: to})
			}
		}
	}
	lg.Entries = d.logEntriesLocked(ids, committed)
	latest := d.mu.cache[ids[len(ids)-1]]
	if latest.e != nil {
		d.mu.latest = latest.e
		lg.Tombstones = tombstones(latest.e)
		if n, err := strconv.Atoi(latest.e.Metadata.Conf[checkpoint.ConfShufflePartitions]); err == nil && n > 0 {
			d.mu.query.StatePartitions = n
		}
	}
	return nil
}
