package pipeline

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/sink/delta"
)

// soakFS wraps the FS of the checkpoint and the table in BenchmarkSoak and
// charges every call (and every Write, Sync and Close of the files it opens)
// to the current batch, by what the path is (soakCategory) and whether the
// maintenance it belongs to (soakOrigin), so that a slow batch says what it
// did.
type soakFS struct {
	vfs.FS
	rec *soakRecorder
}

// soakOps is one batch's FS calls: "category op" -> count and time.
type soakOps map[string]*soakOp

type soakOp struct {
	n   int
	dur time.Duration
}

type soakRecorder struct {
	mu       sync.Mutex
	ckpt     string // path prefixes, for soakCategory
	table    string
	cur      soakOps
	samples  []metrics.Sample
	gcCycles uint64
	gcPause  float64 // cumulative GC pause CPU-seconds
}

func newSoakRecorder(ckpt, table string) *soakRecorder {
	r := &soakRecorder{ckpt: ckpt, table: table, cur: soakOps{},
		samples: []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/pause:cpu-seconds"}}}
	r.gc()
	return r
}

// gc returns the GC cycles and pause CPU time since the last call.
func (r *soakRecorder) gc() (cycles uint64, pause time.Duration) {
	metrics.Read(r.samples)
	c, p := r.samples[0].Value.Uint64(), r.samples[1].Value.Float64()
	cycles, pause = c-r.gcCycles, time.Duration((p-r.gcPause)/float64(runtime.GOMAXPROCS(0))*float64(time.Second))
	r.gcCycles, r.gcPause = c, p
	return cycles, pause
}

// take returns the calls since the last take (one batch's).
func (r *soakRecorder) take() soakOps {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.cur
	r.cur = soakOps{}
	return ops
}

func (r *soakRecorder) add(path, op string, d time.Duration) {
	origin := soakOrigin()
	r.mu.Lock()
	defer r.mu.Unlock()
	k := soakCategory(r.ckpt, r.table, path) + " " + op
	if origin != "" {
		k = origin + ":" + k
	}
	o := r.cur[k]
	if o == nil {
		o = &soakOp{}
		r.cur[k] = o
	}
	o.n++
	o.dur += d
}

// soakOrigins name the maintenance an FS call is part of, by a function on
// the caller's stack.
var soakOrigins = []struct{ fn, origin string }{
	{"delta.(*Table).vacuum", "vacuum"},
	{"delta.(*MergeSink).maintain", "compact"},
	{"delta.(*Table).cleanExpiredLogs", "logclean"},
	{"delta.(*Table).writeCheckpointRows", "dcheckpoint"},
	{"state.(*Store).gc", "stategc"},
	{"checkpoint.(*Writer).Purge", "purge"},
}

// soakOrigin is the maintenance the calling FS call belongs to, "" for the
// batch's own work.
func soakOrigin() string {
	var pcs [48]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		for _, o := range soakOrigins {
			if strings.HasSuffix(f.Function, o.fn) {
				return o.origin
			}
		}
		if !more {
			return ""
		}
	}
}

// soakCategory names what a path under the checkpoint or the table is.
func soakCategory(ckpt, table, p string) string {
	switch {
	case strings.HasPrefix(p, ckpt):
		rel := strings.TrimPrefix(strings.TrimPrefix(p, ckpt), "/")
		first, rest, _ := strings.Cut(rel, "/")
		switch first {
		case "state":
			for _, ext := range []string{".delta", ".snap", ".meta"} {
				if strings.HasSuffix(rest, ext) || strings.Contains(rest, ext+".") {
					return "ck/state" + ext
				}
			}
			return "ck/state"
		case "":
			return "ck"
		}
		if strings.HasPrefix(first, "progress") {
			return "ck/progress"
		}
		return "ck/" + first
	case strings.HasPrefix(p, table):
		rel := strings.TrimPrefix(strings.TrimPrefix(p, table), "/")
		switch {
		case rel == "" || rel == "_delta_log":
			return "tbl"
		case strings.Contains(rel, ".checkpoint.parquet"):
			return "tbl/checkpoint"
		case strings.Contains(rel, "_last_checkpoint"):
			return "tbl/_last_checkpoint"
		case strings.HasPrefix(rel, "_delta_log/"):
			return "tbl/log"
		case strings.Contains(rel, ".parquet"):
			return "tbl/data"
		}
		return "tbl/other"
	}
	return "other"
}

func (fs *soakFS) timed(path, op string, start time.Time) {
	fs.rec.add(path, op, time.Since(start))
}

func (fs *soakFS) wrap(path string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &soakFile{File: f, fs: fs, path: path}, nil
}

func (fs *soakFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	defer fs.timed(name, "create", time.Now())
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *soakFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	defer fs.timed(name, "open", time.Now())
	f, err := fs.FS.Open(name, opts...)
	return fs.wrap(name, f, err)
}

func (fs *soakFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	defer fs.timed(name, "openrw", time.Now())
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

func (fs *soakFS) OpenDir(name string) (vfs.File, error) {
	defer fs.timed(name, "opendir", time.Now())
	f, err := fs.FS.OpenDir(name)
	return fs.wrap(name, f, err)
}

func (fs *soakFS) Link(o, n string) error {
	defer fs.timed(n, "link", time.Now())
	return fs.FS.Link(o, n)
}

func (fs *soakFS) Rename(o, n string) error {
	defer fs.timed(n, "rename", time.Now())
	return fs.FS.Rename(o, n)
}

func (fs *soakFS) Remove(name string) error {
	defer fs.timed(name, "remove", time.Now())
	return fs.FS.Remove(name)
}

func (fs *soakFS) RemoveAll(name string) error {
	defer fs.timed(name, "removeall", time.Now())
	return fs.FS.RemoveAll(name)
}

func (fs *soakFS) List(dir string) ([]string, error) {
	defer fs.timed(dir, "list", time.Now())
	return fs.FS.List(dir)
}

func (fs *soakFS) Stat(name string) (vfs.FileInfo, error) {
	defer fs.timed(name, "stat", time.Now())
	return fs.FS.Stat(name)
}

func (fs *soakFS) MkdirAll(dir string, perm os.FileMode) error {
	defer fs.timed(dir, "mkdir", time.Now())
	return fs.FS.MkdirAll(dir, perm)
}

func (fs *soakFS) Lock(name string) (io.Closer, error) { return fs.FS.Lock(name) }
func (fs *soakFS) Unwrap() vfs.FS                      { return fs.FS }

type soakFile struct {
	vfs.File
	fs   *soakFS
	path string
}

func (f *soakFile) Write(p []byte) (int, error) {
	defer f.fs.timed(f.path, "write", time.Now())
	return f.File.Write(p)
}

func (f *soakFile) WriteAt(p []byte, off int64) (int, error) {
	defer f.fs.timed(f.path, "write", time.Now())
	return f.File.WriteAt(p, off)
}

func (f *soakFile) Read(p []byte) (int, error) {
	defer f.fs.timed(f.path, "read", time.Now())
	return f.File.Read(p)
}

func (f *soakFile) ReadAt(p []byte, off int64) (int, error) {
	defer f.fs.timed(f.path, "read", time.Now())
	return f.File.ReadAt(p, off)
}

func (f *soakFile) Sync() error {
	defer f.fs.timed(f.path, "sync", time.Now())
	return f.File.Sync()
}

func (f *soakFile) SyncData() error {
	defer f.fs.timed(f.path, "sync", time.Now())
	return f.File.SyncData()
}

func (f *soakFile) Close() error {
	defer f.fs.timed(f.path, "close", time.Now())
	return f.File.Close()
}

// soakMaintMetrics are the sink's reports of the maintenance that finished
// since the previous batch (milliseconds).
var soakMaintMetrics = []string{delta.MetricCheckpointMs, delta.MetricAutoCompactMs, delta.MetricVacuumMs, delta.MetricLogCleanupMs}

// maintMs is the maintenance time the batch's sink progress reports.
func (b *soakBatch) maintMs() float64 {
	var ms float64
	for _, k := range soakMaintMetrics {
		if v, err := strconv.ParseFloat(b.metrics[k], 64); err == nil {
			ms += v
		}
	}
	return ms
}

// soakBatch is what one batch took and did.
type soakBatch struct {
	id        int64
	trigger   float64 // triggerExecution ms
	wall      float64 // this progress event to the previous one, ms
	dur       map[string]int64
	ops       soakOps
	gcCycles  uint64
	gcPause   time.Duration
	metrics   map[string]string // the sink's
	stateRows int64
}

// describe renders a batch in one line: its phases, GC, and its FS calls
// over 1 ms, slowest first.
func (b *soakBatch) describe() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "batch %d: trigger->commit %.0f ms, wall %.0f ms; phases", b.id, b.trigger, b.wall)
	keys := make([]string, 0, len(b.dur))
	for k := range b.dur {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != "triggerExecution" && b.dur[k] > 0 {
			fmt.Fprintf(&sb, " %s=%d", k, b.dur[k])
		}
	}
	if b.gcCycles > 0 {
		fmt.Fprintf(&sb, "; gc %d cycles %.1f ms pause", b.gcCycles, float64(b.gcPause)/1e6)
	}
	for _, k := range soakMaintMetrics {
		if v, ok := b.metrics[k]; ok {
			fmt.Fprintf(&sb, "; %s=%s", k, v)
		}
	}
	type kv struct {
		k string
		o *soakOp
	}
	var ops []kv
	for k, o := range b.ops {
		if o.dur >= time.Millisecond {
			ops = append(ops, kv{k, o})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].o.dur > ops[j].o.dur })
	if len(ops) > 0 {
		sb.WriteString("; fs")
	}
	for _, e := range ops {
		fmt.Fprintf(&sb, " [%s x%d %.1fms]", e.k, e.o.n, float64(e.o.dur)/1e6)
	}
	return sb.String()
}

// soakProfile sums the FS time of a set of batches by key, per batch.
func soakProfile(bs []*soakBatch) map[string]float64 {
	m := map[string]float64{}
	for _, b := range bs {
		for k, o := range b.ops {
			m[k] += float64(o.dur) / 1e6 / float64(len(bs))
		}
	}
	return m
}
