package deltasource

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/internal/deltalog"
	"github.com/ethstream/ethstream/internal/readahead"
	"github.com/ethstream/ethstream/sources/internal/pqcol"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/stream"
)

// Source is Delta Lake's streaming source (DeltaSource) over one table
// (doc.go). The engine calls it from one goroutine at a time; Metrics and
// ReportLatestOffset may be called concurrently with the other methods.
type Source struct {
	opts Options
	fs   vfs.FS
	root string
	log  *tableLog

	resolveOnce sync.Once
	resolveErr  error
	tableID     string
	schema      deltalog.Schema
	cols        []column
	startFrom   int64 // resolved startingVersion / startingTimestamp, -1: the snapshot

	env    stream.SourceEnv
	proj   []int
	logger *slog.Logger
	opened bool

	snapMu   sync.Mutex
	snapVer  int64
	snapshot []deltalog.AddFile // the initial snapshot's files at snapVer, in (modificationTime, path) order

	mu     sync.Mutex
	latest stream.Offset
	files  int64
	rows   int64
}

// column is one column of the table's schema.
type column struct {
	name      string // a top-level column, or parent.field for a struct's field
	typ       stream.Type
	nullable  bool
	partition bool
}

var (
	_ stream.Source          = (*Source)(nil)
	_ stream.ReportingSource = (*Source)(nil)
)

// New returns a source for o; it performs no I/O.
func New(o Options) (*Source, error) {
	if o.MaxFilesPerTrigger <= 0 {
		o.MaxFilesPerTrigger = DefaultMaxFilesPerTrigger
	}
	if o.Parallelism <= 0 {
		o.Parallelism = 4
	}
	u, err := url.Parse(o.URI)
	if err != nil {
		return nil, errcode.Wrap(err, errcode.InvalidArgument, "", uriRemedy, "parse delta source uri %q", o.URI)
	}
	s := &Source{opts: o, startFrom: -1}
	switch u.Scheme {
	case "file":
		s.fs = o.FS
		if s.fs == nil {
			s.fs = vfs.Default
		}
		s.root = filepath.Clean(filepath.FromSlash(u.Path))
	case "s3":
		raw := o.URI
		if len(o.ConnQuery) > 0 {
			raw += "?" + o.ConnQuery.Encode()
		}
		loc, err := storage.Parse("--source", raw)
		if err != nil {
			return nil, err
		}
		if s.fs, err = storage.NewFS(context.Background(), vfs.Default, loc); err != nil {
			return nil, err
		}
		s.root = loc.Path
	default:
		return nil, errcode.New(errcode.InvalidArgument, "", uriRemedy, "delta source uri %q: scheme must be file or s3", o.URI)
	}
	s.log = newTableLog(s.fs, s.root)
	return s, nil
}

// NewFromURI is ParseURI followed by New: the CLI's --source NAME=delta:URI.
func NewFromURI(uri string) (*Source, error) {
	o, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	return New(o)
}

// Description names the source as Spark's progress reports do.
func (s *Source) Description() string { return "DeltaSource[" + s.opts.URI + "]" }

// Resolve reads the table's latest snapshot: its id, its schema (mapped to
// the engine's column types), and the starting version the options name.
func (s *Source) Resolve(ctx context.Context) error {
	s.resolveOnce.Do(func() { s.resolveErr = s.resolve(ctx) })
	return s.resolveErr
}

// Schema is the table's schema at the start, in the table's column order
// (partition columns where the schema puts them); empty when Resolve
// failed (Open returns its error).
func (s *Source) Schema() stream.Schema {
	if s.Resolve(context.Background()) != nil {
		return stream.Schema{}
	}
	out := stream.Schema{Fields: make([]stream.Field, len(s.cols))}
	for i, c := range s.cols {
		out.Fields[i] = stream.Field{Name: c.name, Type: c.typ, Nullable: c.nullable}
	}
	return out
}

func (s *Source) resolve(ctx context.Context) error {
	t, err := deltalog.Open(s.fs, s.root)
	if err != nil {
		return err
	}
	snap, err := t.Snapshot(ctx, -1)
	if err != nil {
		return err
	}
	if mode := snap.Metadata.Configuration["delta.columnMapping.mode"]; mode != "" && mode != "none" {
		return errcode.New(deltalog.CodeUnsupportedFeature, s.root, "read the table with Spark, or rewrite it without column mapping",
			"the table uses column mapping (delta.columnMapping.mode=%s), which this source does not read", mode)
	}
	s.tableID, s.schema = snap.Metadata.ID, snap.Schema
	parts := map[string]bool{}
	for _, p := range snap.Metadata.PartitionColumns {
		parts[strings.ToLower(p)] = true
	}
	unsupported := func(name string, t deltalog.DataType) error {
		return errcode.New("UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE", s.root,
			"read a table whose columns are of Spark's scalar types, arrays or structs of them (maps, arrays of complex types and deeper nesting are not read yet)",
			"the delta source does not support the column `%s` of the type %s", name, strings.ToUpper(typeName(t)))
	}
	for _, f := range snap.Schema.Fields {
		// A struct of primitives (the sink's window<start, end>) reads as
		// one column per field, named by its path as Spark SQL names it.
		if f.Type.Struct != nil && !parts[strings.ToLower(f.Name)] {
			for _, sub := range f.Type.Struct.Fields {
				t, ok := streamType(sub.Type)
				if !ok {
					return unsupported(f.Name+"."+sub.Name, sub.Type)
				}
				s.cols = append(s.cols, column{name: f.Name + "." + sub.Name, typ: t, nullable: f.Nullable || sub.Nullable})
			}
			continue
		}
		t, ok := streamType(f.Type)
		if !ok {
			return unsupported(f.Name, f.Type)
		}
		s.cols = append(s.cols, column{name: f.Name, typ: t, nullable: f.Nullable, partition: parts[strings.ToLower(f.Name)]})
	}
	latest := snap.Version
	switch sv := s.opts.StartingVersion; {
	case strings.EqualFold(sv, "latest"):
		s.startFrom = latest + 1
	case sv != "":
		v, err := strconv.ParseInt(sv, 10, 64)
		if err != nil || v < 0 {
			return errcode.New(errcode.InvalidArgument, "", "pass startingVersion=<a version number or latest>", "delta source option startingVersion=%q", sv)
		}
		if v > latest {
			return errcode.New(deltalog.CodeVersionNotFound, s.root, fmt.Sprintf("pick a startingVersion between 0 and %d, or latest", latest),
				"cannot time travel the delta table to version %d: the available versions are up to %d", v, latest)
		}
		s.startFrom = v
	case !s.opts.StartingTimestamp.IsZero():
		if s.startFrom, err = s.versionAt(s.opts.StartingTimestamp, latest); err != nil {
			return err
		}
	}
	return nil
}

// versionAt is the first commit whose file was written at or after ts
// (Delta's startingTimestamp, by the commit files' modification times),
// latest+1 when none is.
func (s *Source) versionAt(ts time.Time, latest int64) (int64, error) {
	vs, err := s.log.versions()
	if err != nil {
		return 0, err
	}
	for _, v := range vs {
		st, err := s.fs.Stat(s.fs.PathJoin(s.log.logDir, fmt.Sprintf("%020d.json", v)))
		if err != nil {
			return 0, err
		}
		if !st.ModTime().Before(ts) {
			return v, nil
		}
	}
	return latest + 1, nil
}

func typeName(t deltalog.DataType) string {
	if k := t.Kind(); k != "" {
		return k
	}
	return "unknown"
}

// streamType maps Delta's primitive types to the engine's type of the
// same Spark type.
func streamType(t deltalog.DataType) (stream.Type, bool) {
	if t.Element != nil && t.Element.Primitive != "" {
		// An array of a primitive type reads as an Array column; the
		// Parquet LIST decodes through internal/columnar.
		e, ok := deltalog.StreamTypeOf(t.Element.Primitive)
		if !ok {
			return 0, false
		}
		return stream.ArrayOf(e), true
	}
	if t.Primitive == "" {
		return 0, false
	}
	return deltalog.StreamTypeOf(t.Primitive)
}

// Open resolves the table and checks that a committed offset names it.
func (s *Source) Open(ctx context.Context, env stream.SourceEnv) error {
	s.env = env
	if err := s.Resolve(ctx); err != nil {
		return err
	}
	if env.Committed != nil {
		id, _, err := parseOffset(env.Committed)
		if err != nil {
			return errcode.Corrupt(env.MetadataDir, err, "committed offset of %s", s.Description())
		}
		if err := s.checkID(id); err != nil {
			return err
		}
	}
	s.proj = s.proj[:0]
	if env.Columns == nil {
		for i := range s.cols {
			s.proj = append(s.proj, i)
		}
	}
	for _, name := range env.Columns {
		i := s.index(name)
		if i < 0 {
			return errcode.New(errcode.InvalidArgument, "", "project only the table's columns: "+s.Schema().String(),
				"the delta table %s has no column %q", s.opts.URI, name)
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
	s.opened = true
	return nil
}

func (s *Source) index(name string) int {
	for i, c := range s.cols {
		if strings.EqualFold(c.name, name) {
			return i
		}
	}
	return -1
}

func (s *Source) checkID(id string) error {
	if id != s.tableID {
		return errcode.New(CodeDifferentTable, s.root,
			"point the query at the table it read, or start it from a new checkpoint to read the new table",
			"the streaming query was reading from an unexpected Delta table (id = '%s'); it used to read from another Delta table (id = '%s') according to the checkpoint",
			s.tableID, id)
	}
	return nil
}

func (s *Source) mustOpen() {
	if !s.opened {
		panic("deltasource: Source used before Open")
	}
}

// snapshotFiles returns the files of the snapshot at version v in Delta's
// initial-snapshot order: modification time, then path.
func (s *Source) snapshotFiles(ctx context.Context, v int64) ([]deltalog.AddFile, error) {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if s.snapshot != nil && s.snapVer == v {
		return s.snapshot, nil
	}
	t, err := deltalog.Open(s.fs, s.root)
	if err != nil {
		return nil, err
	}
	snap, err := t.Snapshot(ctx, v)
	if err != nil {
		return nil, err
	}
	if err := s.checkID(snap.Metadata.ID); err != nil {
		return nil, err
	}
	files := snap.Files()
	sort.SliceStable(files, func(i, j int) bool {
		if files[i].ModificationTime != files[j].ModificationTime {
			return files[i].ModificationTime < files[j].ModificationTime
		}
		return files[i].Path < files[j].Path
	})
	s.snapVer, s.snapshot = v, files
	return files, nil
}

// origin is where a stream without a committed offset starts reading:
// before the startingVersion's first file, or before the first file of
// the initial snapshot at version snap.
func (s *Source) origin(snap int64) position {
	if s.startFrom >= 0 {
		return position{version: s.startFrom, index: baseIndex}
	}
	return position{version: snap, index: baseIndex, starting: true}
}

// walk visits the files after from, in stream order, up to until (nil: no
// bound), until visit returns false. last says the file is the last of its
// version (or of the snapshot). A walk from the initial snapshot stops at
// its end: a batch never spans the snapshot and the commits after it, so
// that a batch without a start offset is read from the snapshot its end
// names (Delta's getBatch rule: the end's version, or the one before).
// Each commit is checked before its files are visited (checkCommit).
func (s *Source) walk(ctx context.Context, from position, until *position, visit func(p position, f deltalog.AddFile, last bool) bool) error {
	if from.starting {
		files, err := s.snapshotFiles(ctx, from.version)
		if err != nil {
			return err
		}
		for i := from.index + 1; i < int64(len(files)); i++ {
			p := position{version: from.version, index: i, starting: true}
			if until != nil && p.after(*until) {
				return nil
			}
			if !visit(p, files[i], i == int64(len(files))-1) {
				return nil
			}
		}
		return nil
	}
	latest, err := s.log.latest()
	if err != nil {
		return err
	}
	for v := from.version; v <= latest; v++ {
		if until != nil && (v > until.version || v == until.version && until.index < 0) {
			return nil // nothing of version v is in the batch: its commit is not checked
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c, err := s.log.commit(v)
		if err != nil {
			return err
		}
		adds, err := s.checkCommit(c)
		if err != nil {
			return err
		}
		for i := range adds {
			p := position{version: v, index: int64(i)}
			if !p.after(from) {
				continue
			}
			if until != nil && p.after(*until) {
				return nil
			}
			if !visit(p, adds[i], i == len(adds)-1) {
				return nil
			}
		}
	}
	return nil
}

// checkCommit applies Delta's rules to a commit the stream reaches and
// returns the files it emits: a schema that the query's schema cannot
// read (a column it lacks, a type that differs) stops the stream; a commit
// that removes data is refused unless an option says what to do with it.
func (s *Source) checkCommit(c *commit) ([]deltalog.AddFile, error) {
	if c.metaData != nil {
		if c.metaData.ID != s.tableID {
			return nil, s.checkID(c.metaData.ID)
		}
		if err := s.readable(c); err != nil {
			return nil, err
		}
	}
	if c.protocol != nil && (c.protocol.MinReaderVersion > deltalog.ReaderVersion || len(c.protocol.ReaderFeatures) > 0) {
		return nil, errcode.New(deltalog.CodeUnsupportedProtocol, s.root, "read the table with a reader of its protocol",
			"commit %d raises the table's reader protocol to %d with features %v, which this source does not read", c.version, c.protocol.MinReaderVersion, c.protocol.ReaderFeatures)
	}
	for _, a := range c.adds {
		if len(a.DeletionVector) > 0 && string(a.DeletionVector) != "null" {
			return nil, errcode.New(deltalog.CodeUnsupportedFeature, s.root, "read the table with Spark, or purge its deletion vectors (REORG TABLE ... APPLY (PURGE))",
				"commit %d adds %s with a deletion vector (table feature deletionVectors), which this source does not read", c.version, a.Path)
		}
	}
	if len(c.removes) == 0 {
		return c.adds, nil
	}
	o := s.opts
	if len(c.adds) == 0 { // a delete
		if o.IgnoreDeletes || o.IgnoreChanges || o.SkipChangeCommits {
			return nil, nil
		}
		return nil, errcode.New(CodeIgnoreDelete, s.root,
			"set ignoreDeletes=true to skip commits that only delete, or skipChangeCommits=true to skip every commit that removes data",
			"detected deleted data (for example %s) from streaming source at version %d; this is currently not supported", c.removes[0].Path, c.version)
	}
	switch {
	case o.SkipChangeCommits:
		return nil, nil
	case o.IgnoreChanges:
		return c.adds, nil
	}
	return nil, errcode.New(CodeIgnoreChanges, s.root,
		"set skipChangeCommits=true to skip commits that update or delete existing data, or ignoreChanges=true to re-emit the rewritten files (rows may repeat)",
		"detected a data update (for example %s) in the source table at version %d; this is currently not supported", c.removes[0].Path, c.version)
}

// readable checks that every column of the commit's schema is a column of
// the query's schema with the same type: files written under it read with
// nulls for the columns they lack (an additive change the query started
// after); anything else needs a restart (Delta's rule).
func (s *Source) readable(c *commit) error {
	sch, err := deltalog.ParseSchema(c.metaData.SchemaString)
	if err != nil {
		return errcode.Corrupt(s.root, err, "schema of commit %d", c.version)
	}
	for _, f := range sch.Fields {
		g, ok := s.schema.Field(f.Name)
		if !ok || typeName(g.Type) != typeName(f.Type) {
			return errcode.New(CodeSchemaChanged, s.root,
				"restart the query: it then reads with the new schema if the change is additive; otherwise start it from a new checkpoint",
				"detected schema change at version %d: streaming source schema: %s; the commit's schema: %s", c.version, s.schema.String(), sch.String())
		}
	}
	return nil
}

// LatestOffset admits up to maxFilesPerTrigger files (and, softly,
// maxBytesPerTrigger bytes) after start and returns the offset of the last
// admitted one; (version+1, -1) when it is the last of its version.
func (s *Source) LatestOffset(ctx context.Context, start stream.Offset) (stream.Offset, error) {
	s.mustOpen()
	var from position
	if start == nil {
		latest, err := s.log.latest()
		if err != nil {
			return nil, err
		}
		from = s.origin(latest)
	} else {
		id, p, err := parseOffset(start)
		if err != nil {
			return nil, errcode.Corrupt(s.env.MetadataDir, err, "start offset of %s", s.Description())
		}
		if err := s.checkID(id); err != nil {
			return nil, err
		}
		from = p
	}
	var end *position
	n, bytes := 0, int64(0)
	// The walk stops as soon as the limit is reached, so that a commit
	// after the batch's last file is not checked (a delete there is the
	// next batch's refusal, as in Delta).
	err := s.walk(ctx, from, nil, func(p position, f deltalog.AddFile, last bool) bool {
		n++
		bytes += f.Size
		e := p
		if last {
			e = position{version: p.version + 1, index: baseIndex}
		}
		end = &e
		return n < s.opts.MaxFilesPerTrigger && (s.opts.MaxBytesPerTrigger <= 0 || bytes < s.opts.MaxBytesPerTrigger)
	})
	if err != nil {
		return nil, err
	}
	if end == nil {
		return start, nil
	}
	out := formatOffset(s.tableID, *end)
	s.mu.Lock()
	s.latest = out
	s.mu.Unlock()
	return out, nil
}

// ReadBatch emits the rows of the files in (start, end], in stream order.
func (s *Source) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	s.mustOpen()
	id, until, err := parseOffset(end)
	if err != nil {
		return errcode.Corrupt(s.env.MetadataDir, err, "end offset of %s", s.Description())
	}
	if err := s.checkID(id); err != nil {
		return err
	}
	var from position
	if start == nil {
		snap := until.version
		if !until.starting {
			snap--
		}
		from = s.origin(snap)
	} else if id, from, err = parseOffset(start); err != nil {
		return errcode.Corrupt(s.env.MetadataDir, err, "start offset of %s", s.Description())
	} else if err := s.checkID(id); err != nil {
		return err
	}
	var files []deltalog.AddFile
	if err := s.walk(ctx, from, &until, func(_ position, f deltalog.AddFile, _ bool) bool {
		files = append(files, f)
		return true
	}); err != nil {
		return err
	}
	if len(files) == 0 {
		return nil
	}
	workers := min(s.opts.Parallelism, len(files))
	// emit does not retain a batch (stream.Source), so its value slices
	// decode a later file: fresh ones were most of the source's
	// allocations, each cleared by the allocator.
	pool := &columnar.Pool{}
	return readahead.Map(ctx, len(files), workers, 2*workers+1, func() func(context.Context, int) ([]*stream.Batch, error) {
		return func(ctx context.Context, i int) ([]*stream.Batch, error) { return s.readFile(ctx, files[i], pool) }
	}, func(i int, bs []*stream.Batch) error {
		var n int64
		for _, b := range bs {
			n += int64(b.Len)
			if err := emit(b); err != nil {
				return err
			}
			pool.Put(b)
		}
		s.mu.Lock()
		s.files++
		s.rows += n
		s.mu.Unlock()
		return nil
	})
}

// filePath is an add action's file: its path is URL-encoded and relative
// to the table, or an absolute URI.
func (s *Source) filePath(p string) (string, error) {
	if strings.Contains(p, "://") || strings.HasPrefix(p, "file:") {
		u, err := url.Parse(p)
		if err != nil {
			return "", err
		}
		if u.Scheme == "file" {
			return filepath.FromSlash(u.Path), nil
		}
		return p, nil
	}
	d, err := url.PathUnescape(p)
	if err != nil {
		return "", err
	}
	return s.fs.PathJoin(s.root, filepath.FromSlash(d)), nil
}

func (s *Source) readFile(ctx context.Context, f deltalog.AddFile, pool *columnar.Pool) ([]*stream.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := s.filePath(f.Path)
	if err != nil {
		return nil, errcode.Corrupt(s.root, err, "add action path %q", f.Path)
	}
	data, err := readWhole(s.fs, p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errcode.Wrap(err, deltalog.CodeMissingFile, p, "restore the file, or restart the query from a new checkpoint",
				"a data file the stream reads is missing")
		}
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	var cols []pqcol.Column
	for _, i := range s.proj {
		if c := s.cols[i]; !c.partition {
			cols = append(cols, pqcol.Column{Name: c.name, Type: c.typ})
		}
	}
	bs, err := pqcol.DecodePooled(bytes.NewReader(data), int64(len(data)), cols, pool)
	if err != nil {
		return nil, errcode.Wrap(err, deltalog.CodeCorruptFile, p, "restore the file from a backup", "cannot read the data file")
	}
	for _, b := range bs {
		out := make([]stream.Column, len(s.proj))
		k := 0
		for j, i := range s.proj {
			c := s.cols[i]
			if !c.partition {
				out[j] = b.Columns[k]
				out[j].Name = c.name
				k++
				continue
			}
			v := f.PartitionValues[c.name]
			if v == nil {
				for name, pv := range f.PartitionValues {
					if strings.EqualFold(name, c.name) {
						v = pv
					}
				}
			}
			col, err := partitionColumn(c, v, b.Len)
			if err != nil {
				return nil, errcode.Corrupt(s.root, err, "partition value of %s in %s", c.name, f.Path)
			}
			out[j] = col
		}
		b.Columns = out
	}
	return bs, nil
}

// partitionColumn is a partition value as a constant column: Delta writes
// partition values as strings (numbers in decimal, timestamps as
// "yyyy-MM-dd HH:mm:ss[.SSSSSS]" or ISO 8601 in UTC); nil or "" is null.
func partitionColumn(c column, v *string, n int) (stream.Column, error) {
	col := stream.Column{Name: c.name, Type: c.typ}
	null := v == nil || (*v == "" && c.typ != stream.String)
	if null {
		col.Valid = make([]bool, n)
	}
	switch c.typ.Storage() {
	case stream.Decimal:
		col.Decimals = make([]stream.Dec128, n)
		if !null {
			x, ok := stream.ParseDecimal(*v, c.typ.Precision(), c.typ.Scale())
			if !ok {
				return col, fmt.Errorf("decimal partition value %q does not parse as %s", *v, c.typ)
			}
			for i := range col.Decimals {
				col.Decimals[i] = x
			}
		}
	case stream.String:
		col.Strings = make([]string, n)
		if !null {
			for i := range col.Strings {
				col.Strings[i] = *v
			}
		}
		if c.typ == stream.Binary && !null {
			return col, fmt.Errorf("binary partition value %q", *v) // Spark refuses binary partition columns
		}
	case stream.Float64:
		col.Float64s = make([]float64, n)
		if !null {
			x, err := strconv.ParseFloat(*v, 64)
			if err != nil {
				return col, err
			}
			for i := range col.Float64s {
				col.Float64s[i] = x
			}
		}
	default:
		col.Int64s = make([]int64, n)
		if !null {
			var x int64
			var err error
			switch c.typ {
			case stream.Timestamp, stream.TimestampNTZ:
				x, err = partitionTimestamp(*v)
			case stream.Date:
				var d time.Time
				if d, err = time.Parse(time.DateOnly, *v); err == nil {
					x = d.Unix() / 86400
				}
			case stream.Boolean:
				var b bool
				if b, err = strconv.ParseBool(*v); b {
					x = 1
				}
			default:
				x, err = strconv.ParseInt(*v, 10, 64)
			}
			if err != nil {
				return col, err
			}
			for i := range col.Int64s {
				col.Int64s[i] = x
			}
		}
	}
	return col, nil
}

func partitionTimestamp(v string) (int64, error) {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999", time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UnixMicro(), nil
		}
	}
	return 0, fmt.Errorf("timestamp partition value %q does not parse", v)
}

// readWhole reads the file p into one buffer of its size (its Stat, free
// on S3, where the GET's response said it): io.ReadAll's doubling copied
// and cleared each file about twice, a fifth of the source's CPU time in
// BenchmarkReadTable.
func readWhole(fs vfs.FS, p string) ([]byte, error) {
	f, err := fs.Open(p)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		buf.Grow(int(st.Size()) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), errors.Join(err, f.Close())
}

// Commit is a no-op: the table's log is the source's log.
func (s *Source) Commit(ctx context.Context, end stream.Offset) error { return nil }

// Close releases nothing.
func (s *Source) Close() error { return nil }

// ReportLatestOffset is the newest offset admitted, nil if none.
func (s *Source) ReportLatestOffset() stream.Offset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// Metrics reports filesRead and rowsRead since New.
func (s *Source) Metrics() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]string{"filesRead": strconv.FormatInt(s.files, 10), "rowsRead": strconv.FormatInt(s.rows, 10)}
}
