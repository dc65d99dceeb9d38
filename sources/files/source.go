package files

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/readahead"
	"github.com/ethstream/ethstream/sources/internal/filelog"
	"github.com/ethstream/ethstream/stream"
)

// DefaultParallelism is how many files are read and decoded at once.
const DefaultParallelism = 4

// Source is Spark's FileStreamSource over a directory of Parquet, JSON-lines
// or CSV files of any schema (doc.go). The engine calls it from one
// goroutine at a time; Metrics and ReportLatestOffset may be called
// concurrently with the other methods.
type Source struct {
	opts Options
	st   store
	c    *counters

	// Resolved once (resolve): the schema and the partition layout.
	resolveOnce sync.Once
	resolveErr  error
	layout      *layout
	probed      []listed // the listing resolve made, handed to the first admission

	env    stream.SourceEnv
	log    *filelog.Log
	logger *slog.Logger
	opened bool
	proj   []int

	nextID     int64
	entries    []filelog.Entry
	seen       map[string]struct{}
	latestSeen int64 // newest modification time (ms) admitted, for maxFileAge
	sizes      sync.Map
	snapshot   map[string]struct{}
	snapObjs   []filelog.Object

	mu      sync.Mutex
	latest  stream.Offset
	pending int64
	files   int64
	rows    int64
}

var (
	_ stream.Source             = (*Source)(nil)
	_ stream.AvailableNowSource = (*Source)(nil)
	_ stream.ReportingSource    = (*Source)(nil)
)

// New returns a source for o. It validates the options (a schema is
// required unless o.SchemaInference) and prepares the store client; it
// performs no I/O.
func New(o Options) (*Source, error) {
	if _, ok := formatOptions[o.Format]; !ok {
		return nil, errcode.New(errcode.InvalidArgument, "", "use parquet, json or csv", "unknown file format %q", o.Format)
	}
	if o.Schema == nil && !o.SchemaInference {
		return nil, errcode.New(CodeSchemaRequired, "",
			"pass the schema in Spark's DDL form, e.g. schema=order_id STRING, amount DOUBLE, event_time TIMESTAMP (URL-encoded in the URI), or set --conf spark.sql.streaming.schemaInference=true to infer it from the files present at the start",
			"schema must be specified when creating a streaming source DataFrame (the %s source at %s); spark.sql.streaming.schemaInference is off", o.Format, o.URI)
	}
	if o.Mode == "" {
		o.Mode = Permissive
	}
	if o.CorruptColumn == "" {
		o.CorruptColumn = DefaultCorruptColumn
	}
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	s := &Source{opts: o, c: &counters{}}
	u, err := url.Parse(o.URI)
	if err != nil {
		return nil, errcode.Wrap(err, errcode.InvalidArgument, "", uriRemedy, "parse %s source uri %q", o.Format, o.URI)
	}
	switch u.Scheme {
	case "file":
		fs := o.FS
		if fs == nil {
			fs = vfs.Default
		}
		s.st = &localStore{fs: fs, dir: filepath.Clean(filepath.FromSlash(u.Path)), c: s.c}
	case "s3":
		st, err := newS3Store(context.Background(), o, s.c, s.clock)
		if err != nil {
			return nil, errcode.Wrap(err, errcode.InvalidArgument, o.URI, "check the AWS configuration (AWS_REGION, AWS_PROFILE)", "configure s3 client")
		}
		s.st = st
	default:
		return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "%s source uri %q: scheme must be file or s3", o.Format, o.URI)
	}
	return s, nil
}

// NewFromURI is ParseURI followed by New: the CLI's
// --source NAME=FORMAT:URI for FORMAT parquet, json or csv.
func NewFromURI(format, uri string, schemaInference bool) (*Source, error) {
	o, err := ParseURI(format, uri)
	if err != nil {
		return nil, err
	}
	o.SchemaInference = schemaInference
	return New(o)
}

func (s *Source) clock() stream.Clock {
	if s.env.Clock != nil {
		return s.env.Clock
	}
	return stream.SystemClock{}
}

// Description names the source in progress reports, as Spark's does.
func (s *Source) Description() string { return "FileStreamSource[" + s.opts.URI + "]" }

// Format is the file format: parquet, json or csv.
func (s *Source) Format() string { return s.opts.Format }

// Resolve lists the location once and resolves the schema: the declared
// one (or one inferred from the files present), with the partition
// columns discovered from key=value directories. Schema and Open call it;
// a caller may call it first to refuse a start before anything is written.
func (s *Source) Resolve(ctx context.Context) error {
	s.resolveOnce.Do(func() { s.resolveErr = s.resolve(ctx) })
	return s.resolveErr
}

// Schema is the source's schema (Spark's Source.schema): the data columns,
// then the partition columns; empty when Resolve failed (Open returns its
// error).
func (s *Source) Schema() stream.Schema {
	if s.Resolve(context.Background()) != nil {
		return stream.Schema{}
	}
	return s.layout.Schema()
}

func (s *Source) resolve(ctx context.Context) error {
	objs, err := s.listFiltered(ctx)
	if err != nil {
		return err
	}
	s.probed = objs
	var d discovered
	if !s.opts.RecursiveFileLookup {
		rels := make([]string, len(objs))
		for i, o := range objs {
			rels[i] = o.rel
		}
		if d, err = discoverPartitions(s.st.root(), rels); err != nil {
			return err
		}
	}
	schema := s.opts.Schema
	if schema == nil {
		inferred, err := s.infer(ctx, objs, d)
		if err != nil {
			return err
		}
		schema = &inferred
	}
	s.layout, err = resolveLayout(s.opts.Format, *schema, d, s.opts.CorruptColumn)
	return err
}

// listFiltered lists the data files (pathGlobFilter applied to names) in
// admission order: modification time, then URI (Spark sorts its listing by
// modification time).
func (s *Source) listFiltered(ctx context.Context) ([]listed, error) {
	objs, err := s.st.list(ctx)
	if err != nil {
		return nil, err
	}
	out := objs[:0]
	for _, o := range objs {
		if g := s.opts.PathGlobFilter; g != "" {
			if ok, _ := path.Match(g, path.Base(o.rel)); !ok {
				continue
			}
		}
		out = append(out, o)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].ModTime.Equal(out[j].ModTime) {
			return out[i].ModTime.Before(out[j].ModTime)
		}
		return out[i].URI < out[j].URI
	})
	for _, o := range out {
		s.sizes.Store(o.URI, o.Size)
	}
	return out, nil
}

// Open checks the resolved schema against the projection and loads the
// source log from env.MetadataDir.
func (s *Source) Open(ctx context.Context, env stream.SourceEnv) error {
	if env.FS == nil || env.MetadataDir == "" {
		return fmt.Errorf("open %s: SourceEnv lacks FS or MetadataDir", s.Description())
	}
	s.env = env
	if err := s.Resolve(ctx); err != nil {
		return err
	}
	s.proj = s.proj[:0]
	if env.Columns == nil {
		for i := range s.layout.cols {
			s.proj = append(s.proj, i)
		}
	}
	for _, c := range env.Columns {
		i := s.layout.index(c)
		if i < 0 {
			return errcode.New(errcode.InvalidArgument, "", "project only the source's columns: "+s.layout.Schema().String(),
				"the %s source has no column %q", s.opts.Format, c)
		}
		s.proj = append(s.proj, i)
	}
	s.logger = s.opts.Logger
	if s.logger == nil {
		s.logger = env.Logger
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	retain := int64(env.MinBatchesToRetain)
	if retain <= 0 {
		retain = checkpoint.DefaultMinBatchesToRetain
	}
	s.log = &filelog.Log{FS: env.FS, Dir: env.MetadataDir, Retain: retain}
	first, next, err := s.log.Scan()
	if err != nil {
		return err
	}
	s.nextID, s.entries, s.seen, s.latestSeen = next, nil, map[string]struct{}{}, 0
	for id := first; id < next; id++ {
		es, err := s.log.Read(id)
		if err != nil {
			return err
		}
		s.entries = append(s.entries, es...)
	}
	for _, e := range s.entries {
		s.seen[e.Path] = struct{}{}
		s.latestSeen = max(s.latestSeen, e.Timestamp)
	}
	if env.Committed != nil {
		c, err := filelog.ParseOffset(env.Committed)
		if err != nil {
			return errcode.Corrupt(env.MetadataDir, err, "committed offset of %s", s.Description())
		}
		if c >= s.nextID {
			return errcode.Corrupt(env.MetadataDir, nil,
				"committed offset logOffset %d but the source log ends at %d: source log files are missing", c, s.nextID-1)
		}
	}
	if s.nextID > 0 {
		s.setLatest(filelog.FormatOffset(s.nextID - 1))
	}
	s.opened = true
	return nil
}

func (s *Source) setLatest(o stream.Offset) {
	s.mu.Lock()
	s.latest = o
	s.mu.Unlock()
}

func (s *Source) mustOpen() {
	if !s.opened {
		panic("files: Source used before Open")
	}
}

func (s *Source) list(ctx context.Context) ([]filelog.Object, error) {
	objs := s.probed
	s.probed = nil
	if objs == nil {
		var err error
		if objs, err = s.listFiltered(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]filelog.Object, len(objs))
	for i, o := range objs {
		out[i] = o.Object
	}
	return out, nil
}

// PrepareAvailableNow snapshots the listing: later LatestOffset calls admit
// only files that exist now, without listing again.
func (s *Source) PrepareAvailableNow(ctx context.Context) error {
	s.mustOpen()
	objs, err := s.list(ctx)
	if err != nil {
		return err
	}
	s.snapshot = make(map[string]struct{}, len(objs))
	for _, o := range objs {
		s.snapshot[o.URI] = struct{}{}
	}
	s.snapObjs = objs
	return nil
}

// LatestOffset returns {"logOffset":n}, admitting new files (filelog.Admit
// with the source's limits) as log id n, or re-using log id start+1 when a
// previous run wrote it and crashed before planning the batch.
func (s *Source) LatestOffset(ctx context.Context, start stream.Offset) (stream.Offset, error) {
	s.mustOpen()
	st, err := filelog.ParseOffset(start)
	if err != nil {
		return nil, errcode.Corrupt(s.env.MetadataDir, err, "start offset of %s", s.Description())
	}
	switch {
	case st+1 < s.nextID:
		return filelog.FormatOffset(st + 1), nil
	case st+1 > s.nextID:
		return nil, errcode.Corrupt(s.env.MetadataDir, nil,
			"start offset logOffset %d but the source log ends at %d: source log files are missing", st, s.nextID-1)
	}
	objs := s.snapObjs
	if s.snapshot == nil {
		if objs, err = s.list(ctx); err != nil {
			return nil, err
		}
	}
	admit, pending := filelog.Admit(objs, s.seen, s.snapshot, filelog.Limits{MaxFiles: s.opts.MaxFilesPerTrigger,
		MaxBytes: s.opts.MaxBytesPerTrigger, LatestFirst: s.opts.LatestFirst, MaxFileAge: s.opts.MaxFileAge}, s.nextID, s.latestSeen)
	s.mu.Lock()
	s.pending = pending
	s.mu.Unlock()
	if len(admit) == 0 {
		return start, nil
	}
	toWrite := admit
	if filelog.IsCompactID(s.nextID, s.log.Interval()) {
		toWrite = append(append([]filelog.Entry(nil), s.entries...), admit...)
	}
	if err := s.log.Write(s.nextID, toWrite); err != nil {
		return nil, err
	}
	s.entries = append(s.entries, admit...)
	for _, e := range admit {
		s.seen[e.Path] = struct{}{}
		s.latestSeen = max(s.latestSeen, e.Timestamp)
	}
	end := filelog.FormatOffset(s.nextID)
	s.nextID++
	s.setLatest(end)
	if _, err := s.log.Prune(s.nextID - 1); err != nil {
		s.logger.Warn("source log pruning failed; retried after the next admission", "source", s.Description(), "err", err)
	}
	return end, nil
}

// ReadBatch emits the rows of the files admitted by log ids (start, end],
// in log order; files are read and decoded Parallelism at a time.
func (s *Source) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	s.mustOpen()
	st, err := filelog.ParseOffset(start)
	if err != nil {
		return errcode.Corrupt(s.env.MetadataDir, err, "start offset of %s", s.Description())
	}
	en, err := filelog.ParseOffset(end)
	if err != nil {
		return errcode.Corrupt(s.env.MetadataDir, err, "end offset of %s", s.Description())
	}
	if en >= s.nextID {
		return errcode.Corrupt(s.env.MetadataDir, nil,
			"batch ends at logOffset %d but the source log ends at %d: source log files are missing", en, s.nextID-1)
	}
	var files []filelog.Entry
	for id := st + 1; id <= en; id++ {
		es, err := s.log.Batch(id, s.entries)
		if err != nil {
			return err
		}
		files = append(files, es...)
	}
	if len(files) == 0 {
		return nil
	}
	root := decodedPath(s.st.root())
	workers := min(s.opts.Parallelism, len(files))
	return readahead.Map(ctx, len(files), workers, 2*workers+1, func() func(context.Context, int) ([]*stream.Batch, error) {
		r := newReader(&s.opts, s.layout, s.proj)
		return func(ctx context.Context, i int) ([]*stream.Batch, error) {
			return s.readFile(ctx, r, root, files[i])
		}
	}, func(i int, bs []*stream.Batch) error {
		var n int64
		for _, b := range bs {
			n += int64(b.Len)
			if err := emit(b); err != nil {
				return err
			}
		}
		s.mu.Lock()
		s.files++
		s.rows += n
		s.mu.Unlock()
		return nil
	})
}

func decodedPath(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		return u.Host + u.Path
	}
	return uri
}

func (s *Source) readFile(ctx context.Context, r *reader, root string, e filelog.Entry) ([]*stream.Batch, error) {
	size := e.Size
	if v, ok := s.sizes.Load(e.Path); ok {
		size = v.(int64)
	}
	data, err := s.st.read(ctx, e.Path, size)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errcode.Code(err) != "" {
			return nil, err
		}
		return nil, errcode.Wrap(err, CodeFailedReadFile, e.Path, "restore the file (it was admitted into the source log) and restart: the batch re-runs",
			"encountered error while reading file %s", e.Path)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(decodedPath(e.Path), root), "/")
	return r.decode(data, e.Path, rel)
}

// Commit is a no-op: the log keeps minBatchesToRetain ids (filelog).
func (s *Source) Commit(ctx context.Context, end stream.Offset) error {
	if _, err := filelog.ParseOffset(end); err != nil {
		return errcode.Corrupt(s.env.MetadataDir, err, "commit offset of %s", s.Description())
	}
	return nil
}

// Close releases nothing.
func (s *Source) Close() error { return nil }

// ReportLatestOffset is the newest log offset admitted so far, nil if none.
func (s *Source) ReportLatestOffset() stream.Offset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// Metrics reports filesRead, rowsRead, pendingFiles, bytesRead, requests,
// retries and throttles since New.
func (s *Source) Metrics() map[string]string {
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]string{"filesRead": i(s.files), "rowsRead": i(s.rows), "pendingFiles": i(s.pending),
		"bytesRead": i(s.c.bytesRead.Load()), "requests": i(s.c.requests.Load()), "retries": i(s.c.retries.Load()),
		"throttles": i(s.c.throttles.Load())}
}
