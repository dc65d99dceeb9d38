package engine

import (
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// NamedSource is one input of a query. Name "" is an unnamed source (keyed by
// position, only allowed without source evolution).
type NamedSource struct {
	Name   string
	Source stream.Source
}

// Watermark defines event time: the column (of type Timestamp) and the
// delay behind the maximum event time seen.
type Watermark struct {
	Column string
	Delay  time.Duration
}

// TriggerKind selects when batches run.
type TriggerKind int

// Trigger kinds. Values are never renumbered.
const (
	// ProcessingTime runs a batch every Interval (never overlapping; idle
	// triggers, with nothing to do, are skipped) until the context ends or
	// MaxDataBatches data batches ran.
	ProcessingTime TriggerKind = iota
	// AvailableNow processes what is available at start in as many batches as
	// the read limits require, runs the final no-data batch if needed, stops.
	AvailableNow
	// Once recovers, then runs at most one batch and stops.
	Once
	// RealTime runs a batch as soon as new data may be readable: after a
	// batch it plans the next at once; after an idle trigger it waits for a
	// source's notification (stream.DataNotifier) or Interval (the fallback
	// poll, default DefaultRealTimePoll), whichever comes first. Spark 4's
	// Trigger.RealTime runs long-lived batches that stream rows as they
	// arrive; this one is a micro-batch per notification (engine/trigger.go).
	RealTime
)

func (k TriggerKind) String() string {
	switch k {
	case ProcessingTime:
		return "processingTime"
	case AvailableNow:
		return "availableNow"
	case Once:
		return "once"
	case RealTime:
		return "realTime"
	}
	return "TriggerKind(" + strconv.Itoa(int(k)) + ")"
}

// Trigger is a query's trigger.
type Trigger struct {
	Kind TriggerKind
	// Interval is ProcessingTime's period (0 = as fast as possible) and
	// RealTime's fallback poll (0 = DefaultRealTimePoll).
	Interval time.Duration
}

// Stage is one step of a query's plan after the read path: a stateful
// Operator or a stateless Transform, exactly one of them.
type Stage struct {
	Operator  stream.Operator
	Transform stream.Transform
}

// Query is what runs: named sources, the columns it reads, the filter and
// the watermark of its read path (engine/readpath.go), a plan of operators
// (Stages, or the one Operator; none for a query that appends the rows it
// reads), one sink and a trigger. Conf holds the Spark-named
// settings of docs/contracts.md, Configuration (checkpoint.Conf* keys).
type Query struct {
	Name    string
	Sources []NamedSource
	// Columns is the projection: the source columns the operator reads, plus
	// stream.ColSource if it needs the literal source-name column. Nil = every
	// column the sources produce, and the source column.
	Columns   []string
	Watermark *Watermark
	// Where, when set, filters the rows read (a WHERE): a row it does not
	// keep never reaches the plan or the sink. It reads only Columns.
	Where stream.Predicate
	// PreWatermark, when set, is the part of Where that Spark's optimizer
	// pushes below the watermark (PushPredicateThroughNonJoin): only the
	// rows it keeps advance the max event time. Nil: every row read does.
	PreWatermark stream.Predicate
	// Operator is a plan of one stateful operator: the shorthand for
	// Stages = {{Operator: Operator}}. Set it or Stages, not both.
	Operator stream.Operator
	// Stages is the plan in order: each stage's output is the next one's
	// input, the last one's goes to the sink. Its stateful operators are
	// numbered as Spark's statefulOperatorId numbers them, from the sink
	// (opids.go), each with its own state directory
	// <checkpoint>/state/<id>. A plan without a
	// stateful operator appends the rows it reads (projected on Select,
	// then through its transforms) to the sink.
	Stages []Stage
	// Sides, when set, makes the query a two-input one (a join): two sides,
	// each a set of Sources with its own columns, filter and watermark
	// (engine/sides.go); Columns, Where, PreWatermark and Watermark are
	// then unset, and the first stage is a stream.SideOperator.
	Sides []Side
	// Select is what a plan without a stateful operator takes from the
	// rows read, in order: columns it reads (nil: Columns). Unused with an
	// operator.
	Select  []string
	Sink    stream.Sink
	Trigger Trigger
	// MaxDataBatches stops the run after this many data batches committed in
	// it (0 = no limit). Control and no-data batches do not count.
	MaxDataBatches int
	Conf           map[string]string
	// Shape is the query's shape, recorded in the checkpoint and checked by
	// the restart rules on every start (nil: none is recorded or checked).
	Shape *shape.Shape
	// SinkShared lets a checkpoint that has committed nothing start on a
	// table another query writes (SINK_TABLE_IN_USE otherwise): both MERGE
	// into it by key.
	SinkShared bool
}

// Options are the run environment. They are read, never modified, by Run.
type Options struct {
	CheckpointDir string
	// FS is the file system of the checkpoint; nil = vfs.Default.
	FS vfs.FS
	// LocalDir is the operator's local cache directory (OperatorEnv.LocalDir).
	LocalDir string
	// LocalFS is LocalDir's file system (OperatorEnv.LocalFS); nil = the
	// local disk.
	LocalFS vfs.FS
	// Clock; nil = SystemClock.
	Clock  stream.Clock
	Logger *slog.Logger
	// Listeners receive every progress event, after it is appended to
	// the checkpoint's progress log (<ckpt>/progress/).
	Listeners []Listener

	// crash, if set (tests), is called at named points of a batch; an error
	// aborts the run there as a process death would.
	crash func(point string) error
	// trace, if set (tests), receives each batch's plan as the driver starts
	// performing it.
	trace func(p *batchPlan)
	// observe, if set (tests), receives each phase boundary, step and crash
	// point of a batch as the driver reaches it.
	observe func(event string)
	// aheadBytes, if set (tests), replaces readAheadBytes.
	aheadBytes int64
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Clock == nil {
		o.Clock = stream.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.aheadBytes == 0 {
		o.aheadBytes = readAheadBytes
	}
	return o
}

func (o Options) hook(point string) error {
	if point == "" {
		return nil
	}
	if o.observe != nil {
		o.observe("crash point " + point)
	}
	if o.crash == nil {
		return nil
	}
	return o.crash(point)
}

// queryColumns returns the projection handed to sources and whether the
// literal source column is wanted.
func queryColumns(cols []string) (proj []string, withSource bool) {
	if cols == nil {
		return nil, true // the sources' own full schema
	}
	for _, c := range cols {
		if c == stream.ColSource {
			withSource = true
			continue
		}
		proj = append(proj, c)
	}
	return proj, withSource
}

func (q *Query) validateShape() error {
	if q.Operator != nil && len(q.Stages) > 0 {
		return errcode.New(errcode.InvalidArgument, "", "put the operator in Stages", "query has both Operator and Stages")
	}
	for i, s := range q.Stages {
		if (s.Operator == nil) == (s.Transform == nil) {
			return errcode.New(errcode.InvalidArgument, "", "", "stage %d must have an operator or a transform, not both or neither", i)
		}
	}
	if q.Sink == nil {
		return errcode.New(errcode.InvalidArgument, "", "", "query has no sink")
	}
	if len(q.Sources) == 0 {
		return errcode.New(errcode.InvalidArgument, "", "add a --source", "query has no sources")
	}
	for i, s := range q.Sources {
		if s.Source == nil {
			return errcode.New(errcode.InvalidArgument, "", "", "source %d (%q) is nil", i, s.Name)
		}
	}
	if q.Watermark != nil && q.Watermark.Column == "" {
		return errcode.New(errcode.InvalidArgument, "", "", "watermark without a column")
	}
	if q.Trigger.Kind < ProcessingTime || q.Trigger.Kind > RealTime {
		return errcode.New(errcode.InvalidArgument, "", "", "unknown trigger %v", q.Trigger.Kind)
	}
	return nil
}

// providerName shortens a source description to its provider for
// sourceMetadataInfo: "FileStreamSource[s3://b/p]" -> "FileStreamSource".
func providerName(desc string) string {
	if i := strings.IndexAny(desc, "[( "); i > 0 {
		return desc[:i]
	}
	return desc
}

func fmtNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}

// stages is the plan: Stages, or the one Operator.
func (q *Query) stages() []Stage {
	if len(q.Stages) > 0 || q.Operator == nil {
		return q.Stages
	}
	return []Stage{{Operator: q.Operator}}
}

// operators are the plan's stateful operators in execution order (a
// join's left side's, its right side's, then the main chain's:
// planOps); their ids are numberingOf's (opids.go), not their index here.
func (q *Query) operators() []stream.Operator {
	var ops []stream.Operator
	for _, sd := range q.Sides {
		for _, s := range sd.Stages {
			if s.Operator != nil {
				ops = append(ops, s.Operator)
			}
		}
	}
	for _, s := range q.stages() {
		if s.Operator != nil {
			ops = append(ops, s.Operator)
		}
	}
	return ops
}

// operatorSides is the chain of each of operators(): stream.LeftSide or
// stream.RightSide below a join, mainChain otherwise.
func (q *Query) operatorSides() []int {
	var sides []int
	for i, sd := range q.Sides {
		for _, s := range sd.Stages {
			if s.Operator != nil {
				sides = append(sides, i)
			}
		}
	}
	for _, s := range q.stages() {
		if s.Operator != nil {
			sides = append(sides, mainChain)
		}
	}
	return sides
}
