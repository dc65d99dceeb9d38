package s3archive

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/internal/readahead"
	"github.com/ethstream/ethstream/sources/internal/filelog"
	"github.com/ethstream/ethstream/stream"
)

// Source is Spark's FileStreamSource over date-partitioned Parquet block
// files (docs/contracts.md, Data) on S3 or a local path. The engine calls it from one
// goroutine at a time; Metrics and ReportLatestOffset may be called
// concurrently with the other methods.
type Source struct {
	opts   Options
	st     store
	m      *metrics
	parall int

	env    stream.SourceEnv
	cols   []Column // the projection, resolved at Open
	log    *fileLog
	logger *slog.Logger
	opened bool

	// Admission state, rebuilt from the log by Open.
	nextID  int64               // the id the next admitted set gets; the log holds 0..nextID-1
	entries []logEntry          // every admitted entry, in log order (for compaction)
	seen    map[string]struct{} // URIs of every admitted file
	sizes   sync.Map            // URI -> size from the latest listing (saves a HEAD per file)
	// snapshot is the set of files that existed when PrepareAvailableNow ran;
	// nil without availableNow. snapshotObjs is that listing, sorted: with
	// availableNow every LatestOffset admits from it instead of listing the
	// store again (as Spark's FileStreamSource reuses its pre-fetched
	// listing for Trigger.AvailableNow): the answer is the same, since only
	// files in the snapshot may be admitted, and a backfill of 4,080 files at
	// 365 per trigger listed the prefix 12 times.
	snapshot     map[string]struct{}
	snapshotObjs []object
	// probed is the listing Check made just before the start, handed to the
	// first list instead of listing again (a seed-size prefix is 4,080
	// objects: a second listing doubled the restart's cost).
	probed []object
	// moveAdmitted is the move CheckMove admitted just before the start
	// (zero: none); Open records it.
	moveAdmitted move

	mu     sync.Mutex // guards latest
	latest stream.Offset
}

var (
	_ stream.Source             = (*Source)(nil)
	_ stream.AvailableNowSource = (*Source)(nil)
	_ stream.ReportingSource    = (*Source)(nil)
)

// New returns a source for o. It validates the options and prepares the
// store client; it performs no I/O.
func New(o Options) (*Source, error) {
	u, err := url.Parse(o.URI)
	if err != nil {
		return nil, errcode.Wrap(err, errcode.InvalidArgument, "", uriRemedy, "parse s3archive uri %q", o.URI)
	}
	if o.Parallelism < 0 || o.MaxFilesPerTrigger < 0 || o.MaxBytesPerTrigger < 0 || o.ListPageSize < 0 {
		return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "s3archive options must not be negative")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = DefaultBatchTimeout
	}
	if err := validColumns(o.Columns); err != nil {
		return nil, err
	}
	o.Columns = slices.Clone(o.Columns)
	s := &Source{opts: o, m: &metrics{}, parall: o.Parallelism}
	if s.parall == 0 {
		s.parall = DefaultParallelism
		if u.Scheme == "s3" {
			s.parall = DefaultS3Parallelism
		}
	}
	switch u.Scheme {
	case "file":
		if !filepath.IsAbs(filepath.FromSlash(u.Path)) {
			return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "file uri %q must name an absolute path", o.URI)
		}
		fs := o.FS
		if fs == nil {
			fs = vfs.Default
		}
		s.st = &localStore{fs: fs, root: filepath.Clean(filepath.FromSlash(u.Path)), m: s.m}
	case "s3":
		if u.Host == "" {
			return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "s3archive uri %q names no bucket", o.URI)
		}
		st, err := newS3Store(context.Background(), o, u.Host, strings.TrimPrefix(u.Path, "/"), s.m, s.clock)
		if err != nil {
			return nil, errcode.Wrap(err, errcode.InvalidArgument, o.URI, "check the AWS configuration (AWS_REGION, AWS_PROFILE)", "configure s3 client")
		}
		s.st = st
	default:
		return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "s3archive uri %q: scheme must be s3 or file", o.URI)
	}
	return s, nil
}

func (s *Source) clock() stream.Clock {
	if s.env.Clock != nil {
		return s.env.Clock
	}
	return stream.SystemClock{}
}

// Description names the source in progress reports.
func (s *Source) Description() string { return "FileStreamSource[" + s.opts.URI + "]" }

// Schema is the columns the source was configured to read (Options.Columns).
func (s *Source) Schema() stream.Schema { return schemaOf(s.opts.Columns) }

// Open loads the source log from env.MetadataDir: the latest compact file and
// the files after it.
func (s *Source) Open(ctx context.Context, env stream.SourceEnv) error {
	if env.FS == nil || env.MetadataDir == "" {
		return fmt.Errorf("open %s: SourceEnv lacks FS or MetadataDir", s.Description())
	}
	cols, err := projectColumns(s.opts.Columns, env.Columns)
	if err != nil {
		return err
	}
	s.cols = cols
	s.env = env
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
	s.log = newFileLog(env.FS, env.MetadataDir, retain)
	first, next, err := s.log.Scan()
	if err != nil {
		return err
	}
	if err := s.openMoves(env); err != nil {
		return err
	}
	s.nextID = next
	s.entries = nil
	s.seen = make(map[string]struct{})
	for id := first; id < s.nextID; id++ {
		es, err := s.log.Read(id)
		if err != nil {
			return err
		}
		// A compact file holds everything up to its id: it comes first.
		s.entries = append(s.entries, es...)
	}
	for _, e := range s.entries {
		s.seen[e.Path] = struct{}{}
	}
	if env.Committed != nil {
		c, err := parseOffset(env.Committed)
		if err != nil {
			return errcode.Corrupt(env.MetadataDir, err, "committed offset of %s", s.Description())
		}
		if c >= s.nextID {
			return errcode.Corrupt(env.MetadataDir, nil,
				"committed offset logOffset %d but the source log ends at %d: source log files are missing", c, s.nextID-1)
		}
	}
	if s.nextID > 0 {
		s.setLatest(formatOffset(s.nextID - 1))
	}
	s.opened = true
	return nil
}

// openMoves records the move CheckMove admitted (if any) and hands every
// move in force to the log, before Open reads it: the seen set and the
// files of a pending batch are then at the archive's current location.
func (s *Source) openMoves(env stream.SourceEnv) error {
	moves, wrote, err := recordMove(env.FS, env.MetadataDir, s.moveAdmitted)
	if err != nil {
		return err
	}
	s.log.MapPath = nil
	if len(moves) > 0 {
		s.log.MapPath = func(p string) string { return applyMoves(moves, p) }
	}
	if wrote {
		s.logger.Info("the archive moved: the source log's paths are read at the new location", "source", s.Description(),
			"from", s.moveAdmitted.From, "to", s.moveAdmitted.To, "moves", len(moves))
	}
	return nil
}

func (s *Source) setLatest(o stream.Offset) {
	s.mu.Lock()
	s.latest = o
	s.mu.Unlock()
}

func (s *Source) mustOpen() {
	if !s.opened {
		panic("s3archive: Source used before Open")
	}
}

// PrepareAvailableNow snapshots the listing: later LatestOffset calls admit
// only files that exist now.
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
	s.snapshotObjs = objs
	return nil
}

func (s *Source) list(ctx context.Context) ([]object, error) {
	objs, err := s.probed, error(nil)
	s.probed = nil
	if objs == nil {
		objs, err = s.st.list(ctx)
	}
	if err != nil {
		return nil, err
	}
	sortObjects(objs)
	s.m.filesListed.Store(int64(len(objs)))
	for _, o := range objs {
		s.sizes.Store(o.URI, o.Size)
	}
	return objs, nil
}

// LatestOffset returns {"logOffset":n}. When start is the end of the log it
// lists the store and admits up to MaxFilesPerTrigger files never seen
// before as log entry n; when log entry start+1 already exists (a previous
// run admitted it and crashed before planning the batch), it is re-used.
func (s *Source) LatestOffset(ctx context.Context, start stream.Offset) (_ stream.Offset, err error) {
	s.mustOpen()
	ctx, cancel := context.WithTimeoutCause(ctx, s.opts.BatchTimeout, errBatchDeadline)
	defer cancel()
	defer func() { err = deadlineErr(ctx, err) }()
	st, err := parseOffset(start)
	if err != nil {
		return nil, errcode.Corrupt(s.env.MetadataDir, err, "start offset of %s", s.Description())
	}
	switch {
	case st+1 < s.nextID:
		return formatOffset(st + 1), nil
	case st+1 > s.nextID:
		return nil, errcode.Corrupt(s.env.MetadataDir, nil,
			"start offset logOffset %d but the source log ends at %d: source log files are missing", st, s.nextID-1)
	}
	objs := s.snapshotObjs
	if s.snapshot == nil {
		if objs, err = s.list(ctx); err != nil {
			return nil, err
		}
	}
	admit, pending := filelog.Admit(objs, s.seen, s.snapshot,
		filelog.Limits{MaxFiles: s.opts.MaxFilesPerTrigger, MaxBytes: s.opts.MaxBytesPerTrigger}, s.nextID, 0)
	s.m.pendingFiles.Store(pending)
	if len(admit) == 0 {
		return start, nil
	}
	toWrite := admit
	if isCompactID(s.nextID, s.log.Interval()) {
		toWrite = append(append([]logEntry(nil), s.entries...), admit...)
	}
	if err := s.log.Write(s.nextID, toWrite); err != nil {
		return nil, err
	}
	s.entries = append(s.entries, admit...)
	for _, e := range admit {
		s.seen[e.Path] = struct{}{}
	}
	s.m.filesAdmitted.Add(int64(len(admit)))
	end := formatOffset(s.nextID)
	s.nextID++
	s.setLatest(end)
	s.logger.Debug("admitted files", "source", s.Description(), "logOffset", s.nextID-1, "files", len(admit))
	// Pruning is housekeeping after the entry is durable: a failure leaves
	// old files that the next prune deletes, so it is logged, not fatal.
	if n, err := s.log.Prune(s.nextID - 1); err != nil {
		s.logger.Warn("source log pruning failed; retried after the next admission", "source", s.Description(), "err", err)
	} else if n > 0 {
		s.logger.Debug("pruned source log", "source", s.Description(), "files", n, "logOffset", s.nextID-1)
	}
	return end, nil
}

// ReadBatch emits the rows of the files admitted by log entries (start, end],
// one batch per row group, in log order then row-group order. Files are
// fetched and decoded Parallelism at a time, ahead of emission.
func (s *Source) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) (err error) {
	s.mustOpen()
	ctx, cancel := context.WithTimeoutCause(ctx, s.opts.BatchTimeout, errBatchDeadline)
	defer cancel()
	defer func() { err = deadlineErr(ctx, err) }()
	st, err := parseOffset(start)
	if err != nil {
		return errcode.Corrupt(s.env.MetadataDir, err, "start offset of %s", s.Description())
	}
	en, err := parseOffset(end)
	if err != nil {
		return errcode.Corrupt(s.env.MetadataDir, err, "end offset of %s", s.Description())
	}
	if en >= s.nextID {
		return errcode.Corrupt(s.env.MetadataDir, nil,
			"batch ends at logOffset %d but the source log ends at %d: source log files are missing", en, s.nextID-1)
	}
	var files []logEntry
	for id := st + 1; id <= en; id++ {
		es, err := s.log.Batch(id, s.entries)
		if err != nil {
			return err
		}
		files = append(files, es...)
	}
	return s.readFiles(ctx, files, emit)
}

type fileResult struct {
	f   *decodedFile
	err error
}

// readFiles fetches and decodes files on Parallelism long-lived workers, up
// to aheadFiles(Parallelism) files ahead of the one being emitted, and emits
// their batches in order. A worker takes the next file as soon as it is done
// with one, so a slow file holds back emission, not the other workers
// (until the window is full); a decoded file is small (the projected
// columns of ~7,000 rows), the window bounds how many are held. An
// unreadable file is the worker's value, not its error, so that
// skipUnreadable can pass over it in order. Fewer files than workers are
// read by row group instead (split.go).
func (s *Source) readFiles(ctx context.Context, files []logEntry, emit func(*stream.Batch) error) error {
	if len(files) == 0 {
		return nil
	}
	workers := min(s.parall, len(files))
	pool := newFetchPool(workers * (rangeConcurrency - 1))
	defer pool.close()
	cols := &columnar.Pool{}
	if s.splitByRowGroup(len(files)) {
		return s.readRowGroups(ctx, files, pool, cols, emit)
	}
	// The window counts the file being emitted too: one more than
	// aheadFiles keeps aheadFiles reads in flight while it is emitted.
	return readahead.Map(ctx, len(files), workers, aheadFiles(s.parall)+1, func() func(context.Context, int) (fileResult, error) {
		ds := newDecodeState()
		ds.cols = cols
		return func(ctx context.Context, i int) (fileResult, error) {
			f, err := s.readFile(ctx, pool, ds, files[i].Path)
			return fileResult{f, err}, nil
		}
	}, func(i int, r fileResult) error {
		if r.err != nil {
			if s.opts.SkipUnreadable && errcode.Is(r.err, ArchiveFileUnreadable) {
				s.m.skip(files[i].Path)
				s.logger.Warn("skipping unreadable archive file", "file", files[i].Path, "err", r.err)
				return nil
			}
			return r.err
		}
		for _, b := range r.f.batches {
			if err := emit(b); err != nil {
				return err
			}
			// emit does not retain b (stream.Source): its slices decode a
			// later file.
			cols.Put(b)
		}
		s.m.filesRead.Add(1)
		s.m.rowsRead.Add(r.f.rows)
		return nil
	})
}

// aheadFiles is how many files may be read ahead of emission: twice the
// workers, so that every worker has a next file while emission waits for
// the oldest.
func aheadFiles(parallelism int) int { return 2 * parallelism }

func (s *Source) readFile(ctx context.Context, pool *fetchPool, ds *decodeState, uri string) (*decodedFile, error) {
	size, err := s.sizeOf(ctx, uri)
	if err != nil {
		return nil, err
	}
	f, err := decodeFileWith(ctx, s.st, pool, ds, uri, size, s.cols, s.m)
	if err != nil {
		// The listed size may be stale (the object was replaced): ask again
		// when the batch is re-run.
		s.sizes.Delete(uri)
	}
	return f, err
}

// sizeOf is the size of the object at uri: as listed, else asked of the
// store.
func (s *Source) sizeOf(ctx context.Context, uri string) (int64, error) {
	if v, ok := s.sizes.Load(uri); ok {
		return v.(int64), nil
	}
	n, err := s.st.size(ctx, uri)
	if err != nil {
		return 0, readErr(ctx, err, uri, "stat archive object")
	}
	return n, nil
}

// Commit is a no-op: log entries are never rewritten, and old ones are
// pruned after an admission, keeping minBatchesToRetain ids (doc.go), so
// any batch the engine has planned but not committed can be re-run.
func (s *Source) Commit(ctx context.Context, end stream.Offset) error {
	if _, err := parseOffset(end); err != nil {
		return errcode.Corrupt(s.env.MetadataDir, err, "commit offset of %s", s.Description())
	}
	return nil
}

// Close releases nothing: the S3 client's idle connections are shared.
func (s *Source) Close() error { return nil }

// ReportLatestOffset is the newest log offset admitted so far, nil if none.
// Files listed but not yet admitted are reported as the pendingFiles metric.
func (s *Source) ReportLatestOffset() stream.Offset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// Metrics reports counters since New: filesListed, filesAdmitted,
// pendingFiles (listed, not yet admitted), filesRead, rowsRead, bytesRead, requests, retries, throttles, decodeMs,
// skippedFiles and, when any, skipped (comma-separated URIs).
func (s *Source) Metrics() map[string]string { return s.m.snapshot() }

// NewFromURI is ParseURI followed by New, reading files of columns cols:
// the form the CLI's --source NAME=s3archive:URI uses.
func NewFromURI(uri string, cols []Column) (*Source, error) {
	o, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	o.Columns = cols
	return New(o)
}
