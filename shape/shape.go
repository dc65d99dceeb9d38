package shape

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// Dir is the checkpoint subdirectory holding the records.
const Dir = "shape"

// Version is the newest format version this package writes and reads: v2
// adds the sink's identity (Sink.ID), v3 the list of stateful operators
// (Operators) for a plan of more than one, or of one with stateless steps
// of its own (Operator.Input), v4 a join's sides' watermarks
// (Operator.Watermarks), v5 Spark's operator ids (Numbering), v6 the
// join side an operator below a join is on (Operator.Side). A record
// without any of them is written as v1, byte for byte what earlier
// versions wrote, so they still read it; every version reads.
const Version = 6

// NumberingPreOrder is Shape.Numbering of a plan whose stateful operators
// have Spark's ids: IncrementalExecution numbers them as a pre-order
// (top-down) walk of the plan meets them, so the operator nearest the sink
// is 0 and a join comes before its left side's operators, which come
// before its right side's. Version 5; a record without a Numbering (v3 and
// v4) numbers its operators in flow order, the source side's first.
const NumberingPreOrder = "preOrder"

// Operator.Side of an operator below a stream-stream join, on its left or
// right input (version 6).
const (
	SideLeft  = "left"
	SideRight = "right"
)

// KindAggregate is Operator.Kind of a streaming aggregation.
const KindAggregate = "aggregate"

// KindDeduplicate is Operator.Kind of a deduplication (dropDuplicates or
// dropDuplicatesWithinWatermark: its StateSchema tells which); Keys are its
// columns.
const KindDeduplicate = "deduplicate"

// KindJoin is Operator.Kind of a stream-stream join: Keys are its
// equi-join key pairs ("k=k2"), JoinType its type.
const KindJoin = "join"

// KindSessionWindow is Operator.Kind of a session window aggregation
// (package session); its Window has the time column and Gap, Keys are the
// other group columns.
const KindSessionWindow = "sessionWindow"

// KindGlobalLimit is Operator.Kind of LIMIT in append mode (package
// limit, Spark's StreamingGlobalLimitExec): no keys, no aggregates; the
// limit itself shapes no state, so it is not recorded.
const KindGlobalLimit = "globalLimit"

// Source is one input of the query.
type Source struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Location string `json:"location"`
	Options  string `json:"options"`
}

// Window is the event-time window: a time window (Size, Slide) or a
// session window (Gap).
type Window struct {
	Column string `json:"column"`
	Size   string `json:"size"`
	Slide  string `json:"slide"`
	// Gap is a session window's gap ('10 minutes', or "column <name>" for
	// a per-row gap); omitted for a time window, so records without
	// session windows are unchanged.
	Gap string `json:"gap,omitempty"`
}

// Watermark is withWatermark(column, delay).
type Watermark struct {
	Column  string `json:"column"`
	DelayUs int64  `json:"delayUs"`
}

// Sink is where the output goes, and which output it is.
type Sink struct {
	Format   string `json:"format"`
	Location string `json:"location"`
	// ID is the identity of the output whatever its location (a Delta
	// table's metadata id), "" when unknown (a v1 record, or a sink without
	// an identity). Version 2 only.
	ID string `json:"id,omitempty"`
}

// Operator is one stateful operator of the query's plan, as the restart
// rules compare it.
type Operator struct {
	// ID is the operator's id under the shape's Numbering (its state
	// directory).
	ID int `json:"id"`
	// Kind is what the operator is: KindAggregate, KindDeduplicate,
	// KindSessionWindow, KindGlobalLimit or KindJoin.
	Kind   string  `json:"kind"`
	Window *Window `json:"window"`
	// Keys, Aggregates and StateSchema are Shape's fields of the same name,
	// for this operator.
	Keys        []string `json:"keys"`
	Aggregates  []string `json:"aggregates"`
	StateSchema string   `json:"stateSchema"`
	// Input are the stateless steps between the previous operator and
	// this one (a projection, a filter), rendered; none before operator 0,
	// whose input is the query's filter and columns.
	Input []string `json:"input"`
	// JoinType is a join's type (Spark's name: Inner, LeftOuter, ...);
	// "" for the other kinds, and then not written.
	JoinType string `json:"joinType,omitempty"`
	// Watermarks are a join's sides' watermarks, left then right (a null
	// entry: that side has none); not written for the other kinds, nor by
	// a join recorded before they were (the restart rules then compare
	// none).
	Watermarks []*Watermark `json:"watermarks,omitempty"`
	// Side is SideLeft or SideRight for an operator on a join's input
	// (below the join: a deduplication of one side's rows), "" for one on
	// the main chain, and then not written (version 6).
	Side string `json:"side,omitempty"`
}

// Shape is a query's shape. It is a plain value; Equal compares all fields.
//
// The stateful operators are Operators when the plan has more than one;
// a plan of one aggregation is recorded, as before version 3, in the
// top-level Window, Keys, Aggregates and StateSchema (OperatorList reads
// both forms).
type Shape struct {
	Sources      []Source   `json:"sources"`
	From         string     `json:"from"`
	Filter       string     `json:"filter"`
	Projection   []string   `json:"projection"`
	Columns      []string   `json:"columns"`
	Window       *Window    `json:"window"`
	Watermark    *Watermark `json:"watermark"`
	Keys         []string   `json:"keys"`
	Aggregates   []string   `json:"aggregates"`
	OutputMode   string     `json:"outputMode"`
	OutputSchema string     `json:"outputSchema"`
	StateSchema  string     `json:"stateSchema"`
	Sink         Sink       `json:"sink"`
	Trigger      string     `json:"trigger"`
	// Operators is every stateful operator in id order, for a plan of more
	// than one or one with input steps (version 3); nil otherwise.
	Operators []Operator `json:"operators,omitempty"`
	// Numbering is how Operators' ids were given: NumberingPreOrder
	// (Spark's, version 5), or "" for flow order (versions 3 and 4, and a
	// shape of at most one operator, whose id is 0 either way).
	Numbering string `json:"numbering,omitempty"`
}

// OperatorList is the plan's stateful operators in id order: Operators, or
// the one aggregation of the top-level fields (operator 0), or none.
func (s Shape) OperatorList() []Operator {
	if len(s.Operators) > 0 {
		return s.Operators
	}
	if s.StateSchema == "" && len(s.Aggregates) == 0 && len(s.Keys) == 0 && s.Window == nil {
		return nil
	}
	return []Operator{{ID: 0, Kind: KindAggregate, Window: s.Window, Keys: nonNil(s.Keys), Aggregates: nonNil(s.Aggregates),
		StateSchema: s.StateSchema, Input: []string{}}}
}

// WithOperators returns s with its stateful operators set to ops (ids in
// order), in the form Encode writes: one aggregation in the top-level
// fields, more in Operators.
func (s Shape) WithOperators(ops []Operator) Shape {
	s.Window, s.Keys, s.Aggregates, s.StateSchema, s.Operators = nil, nil, nil, "", nil
	switch {
	case len(ops) == 1 && ops[0].Kind == KindAggregate && len(ops[0].Input) == 0:
		o := ops[0]
		s.Window, s.Keys, s.Aggregates, s.StateSchema = o.Window, o.Keys, o.Aggregates, o.StateSchema
	case len(ops) > 0:
		s.Operators = make([]Operator, len(ops))
		for i, o := range ops {
			o.ID, o.Keys, o.Aggregates, o.Input = i, nonNil(o.Keys), nonNil(o.Aggregates), nonNil(o.Input)
			s.Operators[i] = o
		}
	}
	return s
}

// Record is one shape file: the shape and the first batch it applies to.
type Record struct {
	Seq          int64  `json:"-"`
	Path         string `json:"-"`
	FirstBatchID int64  `json:"firstBatchId"`
	Shape        Shape  `json:"shape"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// normal returns s with nil slices as empty ones, so that equal shapes
// encode to the same bytes.
func (s Shape) normal() Shape {
	if len(s.Operators) > 0 {
		s = s.WithOperators(s.Operators)
	}
	s.Projection, s.Columns, s.Keys, s.Aggregates = nonNil(s.Projection), nonNil(s.Columns), nonNil(s.Keys), nonNil(s.Aggregates)
	if s.Sources == nil {
		s.Sources = []Source{}
	}
	return s
}

// Equal reports whether two shapes are identical.
func (s Shape) Equal(o Shape) bool {
	a, _ := json.Marshal(s.normal())
	b, _ := json.Marshal(o.normal())
	return bytes.Equal(a, b)
}

// sideOperators reports whether an operator is on a join's side
// (version 6).
func (s Shape) sideOperators() bool {
	for _, o := range s.Operators {
		if o.Side != "" {
			return true
		}
	}
	return false
}

// sideWatermarks reports whether an operator records a join's sides'
// watermarks (version 4).
func (s Shape) sideWatermarks() bool {
	for _, o := range s.Operators {
		if o.Watermarks != nil {
			return true
		}
	}
	return false
}

// Encode renders a record in the file format: version 6 when an operator
// is on a join's side, version 5 when its
// operators have Spark's ids (Numbering), version 4 when a join records
// its sides' watermarks, version 3 for a plan of several stateful
// operators, else version 2 when the sink has an identity, else version 1.
func Encode(r Record) ([]byte, error) {
	r.Shape = r.Shape.normal()
	var b bytes.Buffer
	v := 1
	switch {
	case r.Shape.sideOperators():
		v = 6
	case r.Shape.Numbering != "":
		v = 5
	case r.Shape.sideWatermarks():
		v = 4
	case len(r.Shape.Operators) > 0:
		v = 3
	case r.Shape.Sink.ID != "":
		v = 2
	}
	b.WriteString("v" + strconv.Itoa(v) + "\n")
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // filters read as written: (gas_used > 0)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Parse reads a record file's content; path is for errors.
func Parse(path string, data []byte) (Record, error) {
	var r Record
	head, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return r, errcode.Corrupt(path, nil, "query shape record has no version line")
	}
	v := 0
	switch string(head) {
	case "v1":
		v = 1
	case "v2":
		v = 2
	case "v3":
		v = 3
	case "v4":
		v = 4
	case "v5":
		v = 5
	case "v6":
		v = 6
	default:
		return r, errcode.Corrupt(path, nil, "query shape record version %q is not v1 to v6", truncate(string(head)))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, errcode.Corrupt(path, err, "query shape record does not parse")
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		return r, errcode.Corrupt(path, nil, "query shape record has trailing data")
	}
	if v < 3 && (v == 2) != (r.Shape.Sink.ID != "") {
		return r, errcode.Corrupt(path, nil, "query shape record v%d has sink id %q: v2 records, and only they, have one", v, r.Shape.Sink.ID)
	}
	if err := checkOperators(path, v, r.Shape); err != nil {
		return r, err
	}
	if sw := r.Shape.sideWatermarks(); (v == 4 && !sw) || (v < 4 && sw) {
		return r, errcode.Corrupt(path, nil, "query shape record v%d: v4 records always, v5 and v6 records may, record a join's sides' watermarks; no other does", v)
	}
	if so := r.Shape.sideOperators(); (v == 6) != so {
		return r, errcode.Corrupt(path, nil, "query shape record v%d: v6 records, and only they, have an operator on a join's side", v)
	}
	if err := checkNumbering(path, v, r.Shape); err != nil {
		return r, err
	}
	if r.FirstBatchID < 0 {
		return r, errcode.Corrupt(path, nil, "query shape record has firstBatchId %d", r.FirstBatchID)
	}
	r.Shape = r.Shape.normal()
	r.Path = path
	return r, nil
}

// checkOperators refuses a record whose operators contradict its version:
// v3 and later list one or more, with ids in order, and nothing in the
// top-level aggregation fields; v1 and v2 list none.
func checkOperators(path string, v int, s Shape) error {
	if v < 3 {
		if s.Operators != nil {
			return errcode.Corrupt(path, nil, "query shape record v%d lists operators: only v3 records do", v)
		}
		return nil
	}
	if len(s.Operators) == 0 {
		return errcode.Corrupt(path, nil, "query shape record v%d lists no operator", v)
	}
	if s.Window != nil || len(s.Keys) > 0 || len(s.Aggregates) > 0 || s.StateSchema != "" {
		return errcode.Corrupt(path, nil, "query shape record v%d has a top-level aggregation besides its operators", v)
	}
	for i, o := range s.Operators {
		if o.ID != i {
			return errcode.Corrupt(path, nil, "query shape record v%d lists operator %d at position %d", v, o.ID, i)
		}
		if o.Kind != KindAggregate && o.Kind != KindDeduplicate && o.Kind != KindSessionWindow && o.Kind != KindJoin && o.Kind != KindGlobalLimit {
			return errcode.Corrupt(path, nil, "query shape record v%d has operator %d of unknown kind %q", v, i, truncate(o.Kind))
		}
		if o.Side != "" && o.Side != SideLeft && o.Side != SideRight {
			return errcode.Corrupt(path, nil, "query shape record v%d has operator %d on side %q, not %q or %q", v, i, truncate(o.Side), SideLeft, SideRight)
		}
	}
	return nil
}

// checkNumbering refuses a record whose numbering contradicts its version:
// v5 and v6, and only they, record Spark's numbering, of two operators or
// more (a plan of one has id 0 under either numbering, and is written as
// before; an operator on a join's side comes with the join, so v6 has two).
// A v6 record may have none: a query that started without recording its
// shape keeps flow order (engine/opids.go).
func checkNumbering(path string, v int, s Shape) error {
	switch {
	case v < 5 && s.Numbering != "":
		return errcode.Corrupt(path, nil, "query shape record v%d has numbering %q: only v5 and v6 records have one", v, truncate(s.Numbering))
	case v == 5 && s.Numbering != NumberingPreOrder, v == 6 && s.Numbering != NumberingPreOrder && s.Numbering != "":
		return errcode.Corrupt(path, nil, "query shape record v%d has numbering %q, not %q", v, truncate(s.Numbering), NumberingPreOrder)
	case v >= 5 && len(s.Operators) < 2:
		return errcode.Corrupt(path, nil, "query shape record v%d lists %d operators: v%d is written for two or more", v, len(s.Operators), v)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Codec is the checkpoint.Log codec of shape/<seq> (doc.go): the
// version-1 record, keyed by seq.
type Codec struct{ checkpoint.BatchNames }

// Encode renders record r (Encode).
func (Codec) Encode(_ int64, r Record) ([]byte, error) { return Encode(r) }

// Decode parses the record of seq read from path (Parse).
func (Codec) Decode(path string, seq int64, data []byte) (Record, error) {
	r, err := Parse(path, data)
	r.Seq = seq
	return r, err
}

// Log is the query shape log of the checkpoint ckpt: strict, since only
// ethstream writes shape/.
func Log(fs vfs.FS, ckpt string) checkpoint.Log[int64, Record] {
	return checkpoint.Log[int64, Record]{FS: fs, Dir: fs.PathJoin(ckpt, Dir), Codec: Codec{}, What: "query shape record", Strict: true}
}

// ReadLatest reads the newest record under <checkpoint>/shape, or nil when
// there is none (a new checkpoint, or one written before shapes were
// recorded). It reads only.
func ReadLatest(fs vfs.FS, ckpt string) (*Record, error) {
	l := Log(fs, ckpt)
	seq, ok, err := l.Latest()
	if err != nil || !ok {
		return nil, err
	}
	r, err := l.Get(seq)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Write publishes record r as <checkpoint>/shape/<seq>, creating the
// directory if needed.
func Write(fs vfs.FS, ckpt string, seq int64, r Record) error {
	l := Log(fs, ckpt)
	if err := durable.EnsureDir(fs, l.Dir); err != nil {
		return err
	}
	return l.Add(seq, r)
}

// RemoveTemps deletes what publishes under shape/ left when they did not
// finish (a crash); only the checkpoint's lock holder may call it.
func RemoveTemps(fs vfs.FS, ckpt string) error { return Log(fs, ckpt).RemoveTemps() }
