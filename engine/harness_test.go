package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// ---- a deterministic in-memory block source ----

// blockTS is block n's event time in µs: 12 s slots from a fixed epoch.
func blockTS(n int64) int64 {
	return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + n*12_000_000
}

func blockMiner(n int64) string { return fmt.Sprintf("0xminer%d", n%3) }

// srcWorld is the data behind a named test source; it survives restarts
// (like an archive or a chain), while memSource objects are per run.
type srcWorld struct {
	start     int64 // first block (start_block)
	available int64 // last block available
	max       int64 // read limit per batch (0 = none)
	grow      int64 // blocks appended at each LatestOffset call (a live chain)
	commits   []string
}

type memSource struct {
	w        *srcWorld
	name     string
	cols     []string
	capAt    int64 // availableNow cap, -1 none
	opened   bool
	readErr  error
	metadata string
	retain   int // SourceEnv.MinBatchesToRetain of the last Open
}

type blockOffset struct {
	Block int64 `json:"block"`
}

func (s *memSource) Open(ctx context.Context, env stream.SourceEnv) error {
	if env.MetadataDir == "" {
		return errors.New("no metadata dir")
	}
	if _, err := env.FS.Stat(env.MetadataDir); err != nil {
		return fmt.Errorf("metadata dir: %w", err)
	}
	s.cols, s.opened, s.capAt, s.metadata, s.retain = env.Columns, true, -1, env.MetadataDir, env.MinBatchesToRetain
	return nil
}

// Schema is the three block columns memSource produces.
func (s *memSource) Schema() stream.Schema {
	return stream.Schema{Fields: []stream.Field{
		{Name: ethblock.ColNumber, Type: stream.Int64}, {Name: ethblock.ColBlockTS, Type: stream.Timestamp},
		{Name: ethblock.ColMiner, Type: stream.String}}}
}

func (s *memSource) Description() string { return "MemorySource[" + s.name + "]" }

func (s *memSource) pos(off stream.Offset) (int64, error) {
	if off == nil {
		return s.w.start - 1, nil
	}
	var o blockOffset
	if err := json.Unmarshal(off, &o); err != nil {
		return 0, err
	}
	return o.Block, nil
}

func (s *memSource) LatestOffset(ctx context.Context, start stream.Offset) (stream.Offset, error) {
	if s.capAt < 0 {
		s.w.available += s.w.grow
	}
	from, err := s.pos(start)
	if err != nil {
		return nil, err
	}
	avail := s.w.available
	if s.capAt >= 0 && s.capAt < avail {
		avail = s.capAt
	}
	if from >= avail {
		return start, nil
	}
	end := avail
	if s.w.max > 0 && from+s.w.max < end {
		end = from + s.w.max
	}
	return json.Marshal(blockOffset{end})
}

func (s *memSource) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	if s.readErr != nil {
		return s.readErr
	}
	from, err := s.pos(start)
	if err != nil {
		return err
	}
	to, err := s.pos(end)
	if err != nil {
		return err
	}
	const chunk = 7
	for lo := from + 1; lo <= to; lo += chunk {
		hi := min(lo+chunk-1, to)
		b := &stream.Batch{Len: int(hi - lo + 1)}
		for _, c := range s.cols {
			col := stream.Column{Name: c}
			switch c {
			case ethblock.ColNumber:
				col.Type = stream.Int64
				for n := lo; n <= hi; n++ {
					col.Int64s = append(col.Int64s, n)
				}
			case ethblock.ColBlockTS:
				col.Type = stream.Timestamp
				for n := lo; n <= hi; n++ {
					col.Int64s = append(col.Int64s, blockTS(n))
				}
			case ethblock.ColMiner:
				col.Type = stream.String
				for n := lo; n <= hi; n++ {
					col.Strings = append(col.Strings, blockMiner(n))
				}
			default:
				return fmt.Errorf("memSource cannot produce column %q", c)
			}
			b.Columns = append(b.Columns, col)
		}
		if err := emit(b); err != nil {
			return err
		}
	}
	return nil
}

func (s *memSource) Commit(ctx context.Context, end stream.Offset) error {
	s.w.commits = append(s.w.commits, string(end))
	return nil
}

func (s *memSource) PrepareAvailableNow(ctx context.Context) error {
	s.capAt = s.w.available
	return nil
}

func (s *memSource) Close() error { return nil }

// ---- a small real stateful operator: count per (hour window, source, miner) ----

const windowUS = int64(time.Hour / time.Microsecond)

type countOp struct {
	env        stream.OperatorEnv
	committed  map[string]int64 // state at the loaded version
	cur        map[string]int64
	updated    map[string]bool
	dropped    int64
	parts      int
	commits    []int64
	failCommit error
}

type stateFile struct {
	Partitions int              `json:"partitions"`
	Rows       map[string]int64 `json:"rows"`
}

func (o *countOp) path(v int64) string {
	return o.env.FS.PathJoin(o.env.StateDir, "v"+strconv.FormatInt(v, 10)+".json")
}

func (o *countOp) load(v int64) (stateFile, error) {
	if v < 0 {
		return stateFile{Rows: map[string]int64{}}, nil
	}
	f, err := o.env.FS.Open(o.path(v))
	if err != nil {
		return stateFile{}, fmt.Errorf("load state version %d: %w", v, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return stateFile{}, err
	}
	var sf stateFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return stateFile{}, fmt.Errorf("state version %d: %w", v, err)
	}
	return sf, nil
}

func (o *countOp) Open(ctx context.Context, env stream.OperatorEnv) error {
	o.env = env
	if err := env.FS.MkdirAll(env.StateDir, 0o755); err != nil {
		return err
	}
	sf, err := o.load(env.Version)
	if err != nil {
		return err
	}
	if env.Version >= 0 && sf.Partitions != env.Partitions {
		return fmt.Errorf("state version %d has %d partitions, engine says %d", env.Version, sf.Partitions, env.Partitions)
	}
	o.parts = env.Partitions
	o.committed = sf.Rows
	o.reset()
	return nil
}

func (o *countOp) reset() {
	o.cur = make(map[string]int64, len(o.committed))
	for k, v := range o.committed {
		o.cur[k] = v
	}
	o.updated = map[string]bool{}
	o.dropped = 0
}

func opKey(ts int64, src, miner string) string {
	return fmt.Sprintf("%d|%s|%s", ts-ts%windowUS, src, miner)
}

func keyWindowEndMs(k string) int64 {
	ws, _ := strconv.ParseInt(k[:strings.IndexByte(k, '|')], 10, 64)
	return (ws + windowUS) / 1000
}

func (o *countOp) Process(ctx context.Context, batchID, wm int64, in *stream.Batch) error {
	ts, miner, src := in.Column(ethblock.ColBlockTS), in.Column(ethblock.ColMiner), in.Column(stream.ColSource)
	if ts == nil || miner == nil || src == nil {
		return fmt.Errorf("input lacks block_ts, miner or source: %d columns", len(in.Columns))
	}
	for i := 0; i < in.Len; i++ {
		if ts.Int64s[i]/1000 < wm {
			o.dropped++
			continue
		}
		k := opKey(ts.Int64s[i], src.Strings[i], miner.Strings[i])
		o.cur[k]++
		o.updated[k] = true
	}
	return nil
}

func (o *countOp) Finish(ctx context.Context, batchID, wm int64) (*stream.Batch, stream.OperatorProgress, error) {
	out := &stream.Batch{Columns: []stream.Column{{Name: "key", Type: stream.String}, {Name: "count", Type: stream.Int64}}}
	for _, k := range sortedKeys(o.updated) {
		out.Columns[0].Strings = append(out.Columns[0].Strings, k)
		out.Columns[1].Int64s = append(out.Columns[1].Int64s, o.cur[k])
		out.Len++
	}
	var removed int64
	for k := range o.cur {
		if keyWindowEndMs(k) <= wm {
			delete(o.cur, k)
			removed++
		}
	}
	return out, stream.OperatorProgress{OperatorName: "countOp", NumRowsTotal: int64(len(o.cur)), NumRowsUpdated: int64(len(o.updated)),
		NumRowsRemoved: removed, NumRowsDroppedByWatermark: o.dropped, NumShufflePartitions: int64(o.parts),
		NumStateStoreInstances: int64(o.parts)}, nil
}

func (o *countOp) write(v int64, rows map[string]int64, parts int) error {
	return o.writeTo(o.path(v), rows, parts)
}

func (o *countOp) writeTo(p string, rows map[string]int64, parts int) error {
	data, _ := json.Marshal(stateFile{Partitions: parts, Rows: rows})
	f, err := o.env.FS.Create(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := o.env.FS.OpenDir(o.env.StateDir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (o *countOp) Commit(ctx context.Context, batchID int64) error {
	if o.failCommit != nil {
		return o.failCommit
	}
	if err := o.write(batchID, o.cur, o.parts); err != nil {
		return err
	}
	o.committed = o.cur
	o.commits = append(o.commits, batchID)
	o.reset()
	return nil
}

func (o *countOp) Abort() { o.reset() }

func (o *countOp) NeedsNoDataBatch(wm int64) (bool, error) {
	for k := range o.cur {
		if keyWindowEndMs(k) <= wm {
			return true, nil
		}
	}
	return false, nil
}

func (o *countOp) Repartition(ctx context.Context, base, batchID int64, n int) (stream.RepartitionStats, error) {
	sf, err := o.load(base)
	if err != nil {
		return stream.RepartitionStats{}, err
	}
	if err := o.write(batchID, sf.Rows, n); err != nil {
		return stream.RepartitionStats{}, err
	}
	from := o.parts
	o.parts = n
	o.committed = sf.Rows
	o.reset()
	return stream.RepartitionStats{From: from, To: n, KeysBefore: int64(len(sf.Rows)), KeysAfter: int64(len(sf.Rows))}, nil
}

func (o *countOp) Close() error { return nil }

// prepOp is countOp with a two-phase commit (stream.CommitPreparer):
// PrepareCommit writes version N under a name Open never reads, Commit
// renames it into place; Abort leaves the prepared file behind, as a crash
// would.
type prepOp struct {
	*countOp
	prepared int64 // -1: nothing prepared
	prepares int
}

func newPrepOp() *prepOp { return &prepOp{countOp: &countOp{}, prepared: -1} }

func (o *prepOp) prepPath(v int64) string { return o.path(v) + ".prepared" }

func (o *prepOp) PrepareCommit(ctx context.Context, batchID int64) error {
	o.prepares++
	if err := o.writeTo(o.prepPath(batchID), o.cur, o.parts); err != nil {
		return err
	}
	o.prepared = batchID
	return nil
}

func (o *prepOp) Commit(ctx context.Context, batchID int64) error {
	if o.prepared != batchID {
		return o.countOp.Commit(ctx, batchID)
	}
	o.prepared = -1
	if o.failCommit != nil {
		return o.failCommit
	}
	if err := o.env.FS.Rename(o.prepPath(batchID), o.path(batchID)); err != nil {
		return err
	}
	d, err := o.env.FS.OpenDir(o.env.StateDir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return err
	}
	o.committed = o.cur
	o.commits = append(o.commits, batchID)
	o.reset()
	return nil
}

func (o *prepOp) Abort() {
	o.prepared = -1
	o.countOp.Abort()
}

// ---- the table: streamtest's Sink keyed by countOp's key column ----

// newTable returns an empty table for countOp's output (key, count), which
// runs see through streamtest.Plain: a bare stream.Sink, so the engine runs
// no table checks.
func newTable() *streamtest.Sink {
	k := streamtest.NewSink()
	k.Key = []string{"key"}
	return k
}

// tableCounts returns the table's count per key.
func tableCounts(k *streamtest.Sink) map[string]int64 {
	m := map[string]int64{}
	for key, row := range k.Table() {
		n, err := strconv.ParseInt(row["count"], 10, 64)
		if err != nil {
			panic(fmt.Sprintf("table row %s: count %q", key, row["count"]))
		}
		m[key] = n
	}
	return m
}

// ---- helpers ----

// treeHash renders every file (path, size, content) under dir, sorted; two
// equal strings mean a byte-identical tree.
func treeHash(fs vfs.FS, dir string) string {
	var lines []string
	var walk func(string)
	walk = func(d string) {
		names, err := fs.List(d)
		if err != nil {
			return
		}
		for _, n := range names {
			p := fs.PathJoin(d, n)
			st, err := fs.Stat(p)
			if err != nil {
				continue
			}
			if st.IsDir() {
				lines = append(lines, p+"/")
				walk(p)
				continue
			}
			f, err := fs.Open(p)
			if err != nil {
				continue
			}
			data, _ := io.ReadAll(f)
			f.Close()
			lines = append(lines, fmt.Sprintf("%s %d %x", p, len(data), data))
		}
	}
	walk(dir)
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// countStates opens a countOp from its state files alone, as
// RepartitionOffline opens a stopped query's state (stream.RecordedStates).
type countStates struct{}

func (countStates) OpenRecorded(ctx context.Context, env stream.OperatorEnv) (stream.StateRepartitioner, error) {
	op := &countOp{}
	if err := op.Open(ctx, env); err != nil {
		return nil, err
	}
	return op, nil
}
