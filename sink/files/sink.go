package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/internal/sinklog"
	"github.com/ethstream/ethstream/stream"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
)

// UnsupportedOutputMode is Spark's error class for a file sink asked for
// update or complete mode.
const UnsupportedOutputMode = "STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE"

// What Spark records for a file of the local disk: Hadoop's
// RawLocalFileSystem reports one replica and a 32 MiB block size.
const (
	localBlockReplication = 1
	localBlockSize        = 32 << 20
)

// CheckOutputMode refuses every output mode but append, as Spark's
// DataSource.createSink does for a file format.
func CheckOutputMode(mode string) error {
	if m := strings.ToLower(mode); m != "append" {
		return errcode.New(UnsupportedOutputMode, "",
			"use --output-mode append (a file sink only adds files), or write to a Delta table, which supports update and complete",
			"Data source parquet does not support %s output mode", m)
	}
	return nil
}

// Sink writes each batch as a Parquet part file of Dir and commits it in
// Dir/_spark_metadata (package doc). Its methods are not safe for
// concurrent use; the engine calls them from one goroutine.
type Sink struct {
	// FS holds the output; vfs.Default for the local disk.
	FS vfs.FS
	// Dir is the output directory on FS.
	Dir string
	// URI is Dir as the log names it, "file:/out" for the local /out; each
	// part file's log path is URI + "/" + its name.
	URI string
	// CompactInterval is spark.sql.streaming.fileSink.log.compactInterval;
	// 0 means sinklog.DefaultCompactInterval.
	CompactInterval int
	// Now gives the modification time recorded in the log; nil means
	// time.Now.
	Now func() time.Time

	queryID string
	leaves  []leaf
	pq      *parquet.Schema
}

// ConfCompactInterval is Spark's conf key of the log's compaction
// interval (Sink.CompactInterval).
const ConfCompactInterval = "spark.sql.streaming.fileSink.log.compactInterval"

var _ stream.Sink = (*Sink)(nil)

// Description is Spark's FileStreamSink.toString.
func (s *Sink) Description() string { return "FileSink[" + s.URI + "]" }

// Close does nothing: every batch is complete on disk when AddBatch returns.
func (s *Sink) Close() error { return nil }

func (s *Sink) log() checkpoint.Log[checkpoint.FileSourceID, []sinklog.FileStatus] {
	return sinklog.Log(s.FS, s.Dir)
}

// Open binds the sink to the query: it checks the output schema can be
// written and that an existing log is readable, before any batch runs.
// It creates nothing; the first batch creates the directories.
func (s *Sink) Open(_ context.Context, env stream.SinkEnv) error {
	if s.CompactInterval < 0 {
		return errcode.New(errcode.InvalidArgument, "", "set a positive compactInterval",
			"spark.sql.streaming.fileSink.log.compactInterval is %d", s.CompactInterval)
	}
	pq, leaves, err := parquetSchema(env.Schema)
	if err != nil {
		return err
	}
	if _, err := sinklog.ReadLog(s.FS, s.Dir); err != nil {
		return err
	}
	s.queryID, s.leaves, s.pq = env.QueryID, leaves, pq
	return nil
}

func (s *Sink) interval() int {
	if s.CompactInterval == 0 {
		return sinklog.DefaultCompactInterval
	}
	return s.CompactInterval
}

// AddBatch writes batch batchID, or skips it when the log already holds
// it (a batch re-run after a crash): part file first, then the log file
// that commits it.
func (s *Sink) AddBatch(_ context.Context, batchID int64, out *stream.Batch) (stream.SinkProgress, error) {
	prog := stream.SinkProgress{Description: s.Description()}
	lg := s.log()
	latest, ok, err := lg.Latest()
	if err != nil {
		return prog, err
	}
	if ok && batchID <= latest.ID {
		return prog, nil // committed before a crash: Spark's "Skipping already committed batch"
	}
	ordered, err := s.inSchemaOrder(out)
	if err != nil {
		return prog, err
	}
	var entries []sinklog.FileStatus
	if ordered.Len > 0 {
		e, err := s.writePart(batchID, ordered)
		if err != nil {
			return prog, err
		}
		entries = append(entries, e)
	}
	key := checkpoint.FileSourceID{ID: batchID}
	if sinklog.IsCompactionBatch(batchID, s.interval()) {
		prior, err := sinklog.ReadLog(s.FS, s.Dir)
		if err != nil {
			return prog, err
		}
		key.Compact = true
		entries = append(prior.Files, entries...)
	}
	if err := durable.EnsureDir(s.FS, lg.Dir); err != nil {
		return prog, fmt.Errorf("create %s: %w", lg.Dir, err)
	}
	if err := lg.Add(key, entries); err != nil && !errors.Is(err, durable.ErrExists) {
		return prog, err
	}
	prog.NumOutputRows = int64(ordered.Len)
	return prog, nil
}

// inSchemaOrder returns out with its columns in the order of the part
// files' leaves, and refuses retractions: an append-mode query emits none.
func (s *Sink) inSchemaOrder(out *stream.Batch) (*stream.Batch, error) {
	for i := range out.Len {
		if out.Sign(i) < 0 {
			return nil, fmt.Errorf("file sink: row %d of the batch is a retraction; append mode emits only insertions", i)
		}
	}
	b := &stream.Batch{Len: out.Len, Columns: make([]stream.Column, len(s.leaves))}
	for i, lf := range s.leaves {
		c := out.Column(lf.col)
		if c == nil || c.Type != lf.typ {
			return nil, fmt.Errorf("file sink: the batch lacks column %s of type %s", lf.col, lf.typ)
		}
		b.Columns[i] = *c
	}
	return b, nil
}

// writePart publishes the batch's part file, replacing the orphan of an
// earlier attempt at the same batch, and makes its directory entry durable
// before the log can name it.
func (s *Sink) writePart(batchID int64, b *stream.Batch) (sinklog.FileStatus, error) {
	id := uuid.NewSHA1(uuid.NameSpaceURL, []byte(s.queryID+"/"+strconv.FormatInt(batchID, 10)))
	name := fmt.Sprintf("part-00000-%s-c000.snappy.parquet", id)
	if err := durable.EnsureDir(s.FS, s.Dir); err != nil {
		return sinklog.FileStatus{}, fmt.Errorf("create %s: %w", s.Dir, err)
	}
	res, err := durable.For(s.FS).Publish(s.Dir, name, durable.Options{Mode: durable.Replace},
		func(w io.Writer) error { return writeParquet(w, s.pq, s.leaves, b) })
	if err != nil {
		return sinklog.FileStatus{}, fmt.Errorf("write part file %s: %w", s.FS.PathJoin(s.Dir, name), err)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return sinklog.FileStatus{
		Path: strings.TrimSuffix(s.URI, "/") + "/" + name, Size: res.Size, ModificationTime: now().UnixMilli(),
		BlockReplication: localBlockReplication, BlockSize: localBlockSize, Action: sinklog.ActionAdd,
	}, nil
}

var _ stream.SinkAdvisor = (*Sink)(nil)

// Remedy words the remedy of a refusal about the sink's output in its own
// terms (--sink and its directory); "" keeps the engine's.
func (s *Sink) Remedy(r stream.SinkRefusal) string {
	if r.Problem == stream.SinkOutputMoved {
		return "point --sink back at " + r.Location + " (a file sink's output directory, with its _spark_metadata log, cannot change), or start the query on a new checkpoint with a new output directory"
	}
	return ""
}
