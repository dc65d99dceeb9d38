package join

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// OperatorName is the join's stateOperators[] name and state schema
// operator name, Spark's StreamingSymmetricHashJoinExec's.
const OperatorName = "symmetricHashJoin"

// CodeUnsupported is the error class of a join Spark's
// UnsupportedOperationChecker refuses (its throwError).
const CodeUnsupported = "_LEGACY_ERROR_TEMP_3102"

// CodeRetractionUnsupported: the input retracts a row, which the join
// cannot take back from rows it already emitted.
const CodeRetractionUnsupported = "RETRACTION_UNSUPPORTED"

// Type is a join type. Values are never renumbered.
type Type int

// Join types: Spark's names (JoinType.toString) in String.
const (
	Inner Type = iota + 1
	LeftOuter
	RightOuter
	FullOuter
	LeftSemi
)

func (t Type) String() string {
	switch t {
	case Inner:
		return "Inner"
	case LeftOuter:
		return "LeftOuter"
	case RightOuter:
		return "RightOuter"
	case FullOuter:
		return "FullOuter"
	case LeftSemi:
		return "LeftSemi"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// ParseType reads a join type as SQL writes it ("inner", "left outer",
// "left", "right_outer", "full", "left semi", ...), case-insensitively.
func ParseType(s string) (Type, bool) {
	k := strings.Join(strings.Fields(strings.ToLower(strings.ReplaceAll(s, "_", " "))), " ")
	switch k {
	case "inner", "":
		return Inner, true
	case "left", "left outer", "leftouter":
		return LeftOuter, true
	case "right", "right outer", "rightouter":
		return RightOuter, true
	case "full", "full outer", "fullouter", "outer":
		return FullOuter, true
	case "left semi", "semi", "leftsemi":
		return LeftSemi, true
	}
	return 0, false
}

// preserves reports whether the join emits side's unmatched rows with
// nulls (the outer side).
func (t Type) preserves(side int) bool {
	switch t {
	case LeftOuter:
		return side == stream.LeftSide
	case RightOuter:
		return side == stream.RightSide
	case FullOuter:
		return true
	}
	return false
}

// Side is one input of the join.
type Side struct {
	// Alias names the side (a relation's alias), for output column names
	// and errors.
	Alias string
	// Schema is the side's rows (the engine's side read path output).
	Schema stream.Schema
	// Keys are the equi-join columns, paired by position with the other
	// side's.
	Keys []string
	// Watermark is the side's event-time column with a watermark, "" for
	// none; Delay its delay.
	Watermark string
	Delay     time.Duration
	// Columns, when not nil, are the side's columns the query reads from
	// the join's rows: the join keeps only them, its keys, its watermark
	// and its range columns, in its state and in its rows, as Spark's
	// optimizer prunes the columns below a join. nil keeps every column of
	// Schema. Output names are decided over the whole Schema
	// (OutputName), so pruning renames nothing.
	Columns []string
}

// Op compares the two sides of a Bound.
type Op int

// Comparison operators. Values are never renumbered.
const (
	LT Op = iota + 1
	LE
	GT
	GE
)

func (o Op) String() string {
	return [...]string{"?", "<", "<=", ">", ">="}[min(int(o), 4)]
}

// Bound is one conjunct of the time-range condition:
// left.LeftColumn + LeftOffset  Op  right.RightColumn + RightOffset, on
// timestamps. `a.ts BETWEEN b.ts AND b.ts + INTERVAL 10 MINUTES` is two:
// {ts GE ts} and {ts LE ts + 10m}.
type Bound struct {
	LeftColumn  string
	LeftOffset  time.Duration
	Op          Op
	RightColumn string
	RightOffset time.Duration
}

func (b Bound) String() string {
	side := func(alias, col string, off time.Duration) string {
		s := alias + "." + col
		switch {
		case off > 0:
			s += " + " + off.String()
		case off < 0:
			s += " - " + (-off).String()
		}
		return s
	}
	return side("left", b.LeftColumn, b.LeftOffset) + " " + b.Op.String() + " " + side("right", b.RightColumn, b.RightOffset)
}

// Spec declares a stream-stream join.
type Spec struct {
	Type        Type
	Left, Right Side
	// Range is the time-range condition, a conjunction (none: the
	// equi-join alone).
	Range []Bound
}

// plan is a validated spec.
type plan struct {
	spec  Spec
	sides [2]sidePlan
	// keyWM is the position of the equi-join key that is a side's
	// watermark column (Spark's findJoinKeyOrdinalForWatermark), -1.
	keyWM  int
	schema state.Schema
	out    stream.Schema
	// outCols maps each output column to (side, column index in the
	// side's schema).
	outCols []outCol
	// rangeCols are each Bound's left and right column indexes, resolved
	// once: inRange runs for every candidate pair.
	rangeCols [][2]int
}

type outCol struct{ side, col int }

// sidePlan is one side, resolved against its schema: Side.Schema is the
// columns the state stores (the pruned ones, or every one in a wide plan),
// full the side's whole input schema (for output names).
type sidePlan struct {
	Side
	full stream.Schema
	// out are the columns the join's rows carry (Columns and the columns
	// the join itself needs), nil for every stored one.
	out  map[string]bool
	keys []int // column index of each key
	wm   int   // column index of the watermark column, -1
	fast bool  // fastNames(Schema.Fields): decodeRow may try fastDecodeRow
}

func invalid(format string, args ...any) error {
	return errcode.New(errcode.InvalidArgument, "", "fix the join's keys, condition or sides", format, args...)
}

// newPlan validates spec: columns and types, then Spark's rules.
func newPlan(spec Spec) (*plan, error) { return buildPlan(spec, nil) }

// buildPlan is newPlan; with stored set, the plan stores those columns of
// each side (a state recorded with more columns than the query reads:
// every column before Side.Columns pruned it, or a query that read more),
// while its rows carry the pruned columns alone (Operator.Open).
func buildPlan(spec Spec, stored *[2][]stream.Field) (*plan, error) {
	p := &plan{spec: spec, keyWM: -1}
	if spec.Type < Inner || spec.Type > LeftSemi {
		return nil, invalid("unknown join type %v", spec.Type)
	}
	if len(spec.Left.Keys) == 0 || len(spec.Left.Keys) != len(spec.Right.Keys) {
		return nil, invalid("a stream-stream join needs equi-join keys, the same number on each side (left %v, right %v)", spec.Left.Keys, spec.Right.Keys)
	}
	for i, s := range []Side{spec.Left, spec.Right} {
		full := s.Schema
		out, err := keptColumns(s, i, spec.Range)
		if err != nil {
			return nil, err
		}
		switch {
		case stored != nil:
			s.Schema = stream.Schema{}
			for _, f := range stored[i] {
				g := full.Field(f.Name)
				if g == nil || g.Type != f.Type {
					return nil, invalid("the state stores column %s.%s (%v), which the side's rows do not have: %s", s.Alias, f.Name, f.Type, full)
				}
				s.Schema.Fields = append(s.Schema.Fields, *g)
			}
		case out != nil:
			s.Schema = pruned(full, out)
		}
		sp := sidePlan{Side: s, full: full, out: out, wm: -1, fast: fastNames(s.Schema.Fields)}
		// The state keeps a row's values as int64, float64 or string
		// (codec.go); a DECIMAL or an array has none of those storages.
		for _, f := range s.Schema.Fields {
			// A stored row is a JSON object by column name ending in
			// "matched" (codec.go): a column of that name would be read
			// back as the flag (Spark's rows are positional: no clash).
			if f.Name == "matched" {
				return nil, invalid("column %s.%s: ethstream's join state names its matched flag \"matched\" (select the column under another name: matched AS %s_matched)", s.Alias, f.Name, s.Alias)
			}
			if st := f.Type.Storage(); st == stream.Decimal || st == stream.Array {
				return nil, invalid("column %s.%s is %v: ethstream's join state keeps no decimal or array column (select the columns the join needs, or cast)", s.Alias, f.Name, f.Type)
			}
		}
		for _, k := range s.Keys {
			j := fieldIndex(s.Schema, k)
			if j < 0 {
				return nil, errcode.New(errcode.UnresolvedColumn, "", "join on columns of the side's rows",
					"join key %q is not a column of side %s: %s", k, s.Alias, s.Schema)
			}
			if s.Schema.Fields[j].Type.Storage() == stream.Float64 {
				return nil, invalid("join key %s.%s is a double: ethstream's join state cannot key a double", s.Alias, k)
			}
			sp.keys = append(sp.keys, j)
		}
		if s.Watermark != "" {
			j := fieldIndex(s.Schema, s.Watermark)
			if j < 0 || s.Schema.Fields[j].Type != stream.Timestamp {
				return nil, invalid("watermark column %q is not a timestamp of side %s", s.Watermark, s.Alias)
			}
			sp.wm = j
		}
		p.sides[i] = sp
	}
	for k := range spec.Left.Keys {
		lt, rt := p.sides[0].Schema.Fields[p.sides[0].keys[k]].Type, p.sides[1].Schema.Fields[p.sides[1].keys[k]].Type
		if lt != rt {
			return nil, invalid("join keys %s.%s (%v) and %s.%s (%v) differ in type", spec.Left.Alias, spec.Left.Keys[k], lt, spec.Right.Alias, spec.Right.Keys[k], rt)
		}
		if p.keyWM < 0 && (spec.Left.Keys[k] == spec.Left.Watermark || spec.Right.Keys[k] == spec.Right.Watermark) {
			p.keyWM = k
		}
	}
	for _, b := range spec.Range {
		if b.Op < LT || b.Op > GE {
			return nil, invalid("time-range condition %s has an unknown comparison", b)
		}
		var cols [2]int
		for i, c := range []string{b.LeftColumn, b.RightColumn} {
			s := p.sides[i]
			j := fieldIndex(s.Schema, c)
			if j < 0 || s.Schema.Fields[j].Type != stream.Timestamp {
				return nil, invalid("time-range condition %s: %q is not a timestamp of side %s", b, c, s.Alias)
			}
			cols[i] = j
		}
		p.rangeCols = append(p.rangeCols, cols)
	}
	if err := p.checkSupported(); err != nil {
		return nil, err
	}
	p.schema = p.stateSchema()
	p.out, p.outCols = p.outputSchema()
	return p, nil
}

// keptColumns are the columns of side s (side i) a pruned join keeps:
// s.Columns, its keys, its watermark and its columns in the range
// condition; nil when s.Columns is nil (every column).
func keptColumns(s Side, i int, rng []Bound) (map[string]bool, error) {
	if s.Columns == nil {
		return nil, nil
	}
	kept := map[string]bool{}
	for _, c := range s.Columns {
		if fieldIndex(s.Schema, c) < 0 {
			return nil, errcode.New(errcode.UnresolvedColumn, "", "read columns of the side's rows",
				"column %q the query reads is not a column of side %s: %s", c, s.Alias, s.Schema)
		}
		kept[c] = true
	}
	for _, k := range s.Keys {
		kept[k] = true
	}
	if s.Watermark != "" {
		kept[s.Watermark] = true
	}
	for _, b := range rng {
		kept[[]string{b.LeftColumn, b.RightColumn}[i]] = true
	}
	return kept, nil
}

// pruned is s with the columns in kept alone, in s's order.
func pruned(s stream.Schema, kept map[string]bool) stream.Schema {
	var out stream.Schema
	for _, f := range s.Fields {
		if kept[f.Name] {
			out.Fields = append(out.Fields, f)
		}
	}
	return out
}

func fieldIndex(s stream.Schema, name string) int {
	for i, f := range s.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// checkSupported applies Spark's UnsupportedOperationChecker
// (checkForStreamStreamJoinWatermark): an outer or semi join needs a
// watermark in the join keys, or a watermark on the other side and a range
// condition that bounds the side whose rows wait (its state value
// watermark).
func (p *plan) checkSupported() error {
	t := p.spec.Type
	if t == Inner || p.keyWM >= 0 {
		return nil
	}
	_, leftOK := p.stateValueWatermark(stream.LeftSide, 1000000)
	_, rightOK := p.stateValueWatermark(stream.RightSide, 1000000)
	ok := false
	switch t {
	case LeftOuter, LeftSemi:
		ok = leftOK
	case RightOuter:
		ok = rightOK
	case FullOuter:
		ok = leftOK || rightOK
	}
	if ok {
		return nil
	}
	return errcode.New(CodeUnsupported, "",
		"define a watermark on both sides and a time-range condition between their event times (e.g. a.ts BETWEEN b.ts AND b.ts + INTERVAL 10 MINUTES), or join on the event time",
		"Stream-stream %s join between two streaming DataFrame/Datasets is not supported without a watermark in the join keys, or a watermark on the nullable side and an appropriate range condition", t)
}

// CheckOutputMode refuses an output mode other than append, with Spark's
// message (a join emits each joined row once).
func CheckOutputMode(mode string) error {
	if strings.EqualFold(mode, "append") || mode == "" {
		return nil
	}
	m := strings.ToUpper(mode[:1]) + strings.ToLower(mode[1:])
	return errcode.New(CodeUnsupported, "", "run the join in append mode",
		"Join between two streaming DataFrames/Datasets is not supported in %s output mode, only in Append output mode", m)
}

// stateValueWatermark is Spark's StreamingJoinHelper.getStateValueWatermark
// for side x given the event-time watermark wmMs of the other side: over
// the conjuncts that bound x's column from below by the other side's
// watermark column, min(wm + c) (minus 1 ms for a non-strict bound), where
// a row of x at or below it can match no future row of the other side.
// ok is false without such a conjunct or without a watermark on the other
// side.
func (p *plan) stateValueWatermark(x int, wmMs int64) (int64, bool) {
	y := 1 - x
	other := p.sides[y]
	if other.Watermark == "" {
		return 0, false
	}
	best, found := int64(math.MaxInt64), false
	for _, b := range p.spec.Range {
		// Normalize to lo < hi (strict) or lo <= hi.
		lSide := struct {
			side int
			col  string
			off  time.Duration
		}{stream.LeftSide, b.LeftColumn, b.LeftOffset}
		rSide := lSide
		rSide.side, rSide.col, rSide.off = stream.RightSide, b.RightColumn, b.RightOffset
		lo, hi, strict := lSide, rSide, b.Op == LT
		switch b.Op {
		case GT, GE:
			lo, hi, strict = rSide, lSide, b.Op == GT
		}
		// x must be on the greater side, the other side's watermark
		// column on the smaller one.
		if hi.side != x || lo.side != y || lo.col != other.Watermark {
			continue
		}
		us := float64(wmMs)*1000 + float64(lo.off.Microseconds()) - float64(hi.off.Microseconds())
		ms := int64(us / 1000)
		if !strict {
			ms--
		}
		best, found = min(best, ms), true
	}
	return best, found
}

// stateSchema is the join's state schema (doc.go, State layout): the
// join type, the keys and each side's value columns are in it, so that a
// restart that changes any of them is STATE_SCHEMA_MISMATCH.
func (p *plan) stateSchema() state.Schema {
	s := state.Schema{OperatorName: OperatorName,
		Key: []state.Field{{Name: ColSide, Type: stream.String}, {Name: ColStore, Type: stream.String}}}
	for k, name := range p.spec.Left.Keys {
		f := state.Field{Name: name, Type: stateType(p.sides[0].Schema.Fields[p.sides[0].keys[k]].Type)}
		if f.Type != stream.String {
			f.Nullable = true
		}
		s.Key = append(s.Key, f)
	}
	s.Key = append(s.Key, state.Field{Name: ColIndex, Type: stream.Int64, Nullable: true})
	s.Value = []state.Field{{Name: ColValue, Type: stream.String}}
	var fields [2][]state.Field
	for i, sp := range p.sides {
		for _, f := range sp.Schema.Fields {
			fields[i] = append(fields[i], state.Field{Name: f.Name, Type: f.Type})
		}
	}
	js, err := json.Marshal(fields)
	if err != nil {
		panic(fmt.Sprintf("join: state schema fields %v: %v", fields, err))
	}
	s.Spec = specFormat3 + " " + specFields + string(js) + p.specRest()
	return s
}

// specRest is the spec after its format word: the join type, and each
// side's keys and columns as text (format 1's whole spec after its word).
func (p *plan) specRest() string {
	var b strings.Builder
	fmt.Fprintf(&b, " stateFormatVersion=2 type=%s", p.spec.Type)
	for i, sp := range p.sides {
		fmt.Fprintf(&b, " %s(keys=%s; values=", sideName(i), strings.Join(sp.Keys, ","))
		for j, f := range sp.Schema.Fields {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%s %v", f.Name, f.Type)
		}
		b.WriteString(")")
	}
	return b.String()
}

// specFields starts the format-2 spec's JSON of each side's columns
// ([left, right], state.Field's JSON): state dump decodes the positional
// values by them (dump.go) without the query.
const specFields = "fields="

// specSideFields reads the columns of each side from a format-2 or
// format-3 spec (the same words after the format's).
func specSideFields(spec string) ([2][]stream.Field, error) {
	var out [2][]stream.Field
	rest, ok := strings.CutPrefix(spec, specFormat3+" "+specFields)
	if !ok {
		rest, ok = strings.CutPrefix(spec, specFormat2+" "+specFields)
	}
	if !ok {
		return out, fmt.Errorf("join state spec %q is not format 2 or 3", spec)
	}
	var fields [2][]state.Field
	if err := json.NewDecoder(strings.NewReader(rest)).Decode(&fields); err != nil {
		return out, fmt.Errorf("join state spec %q: %w", spec, err)
	}
	for i, fs := range fields {
		for _, f := range fs {
			out[i] = append(out[i], stream.Field{Name: f.Name, Type: f.Type})
		}
	}
	return out, nil
}

// The first word of the state schema's spec: the join's state format
// (doc.go, State layout). A binary that knows format 1 only refuses a
// format-2 state (STATE_SCHEMA_MISMATCH) instead of misreading its values,
// and one that knows format 2 at most a format-3 state, whose keys of one
// value have no count.
const (
	specFormat1 = "join/v1"
	specFormat2 = "join/v2"
	specFormat3 = "join/v3"
)

// compatibleSpec accepts a state recorded in format 1 or 2 with the same
// join: format 3 reads its values (each value says its format) and its
// counts (format 2 counted every key), and the next commit records
// format 3.
func (p *plan) compatibleSpec(recorded string) bool {
	if recorded == specFormat1+p.specRest() {
		return true
	}
	rest, ok := strings.CutPrefix(recorded, specFormat2+" ")
	return ok && specFormat3+" "+rest == p.schema.Spec
}

// stateType is the state store type holding a key column of type t.
func stateType(t stream.Type) stream.Type {
	switch {
	case t == stream.Timestamp:
		return t
	case t.Storage() == stream.String:
		return stream.String
	}
	return stream.Int64
}

// OutputName is the join's naming rule for its rows: the name in them of
// column col of side side (stream.LeftSide or RightSide) of a join of type
// t over sides with schemas and aliases (the relations' aliases, else
// their names) is col, or alias_col when both sides have a column col
// (a_ts, b_ts); false when the rows do not carry it (no such column, or a
// left semi join's right side). The query over a join's rows resolves its
// references by it.
func OutputName(t Type, schemas [2]stream.Schema, aliases [2]string, side int, col string) (string, bool) {
	if fieldIndex(schemas[side], col) < 0 || t == LeftSemi && side == stream.RightSide {
		return "", false
	}
	if t != LeftSemi && fieldIndex(schemas[1-side], col) >= 0 {
		return aliases[side] + "_" + col, true
	}
	return col, true
}

// outputName is OutputName for this join, over the sides' whole schemas;
// false too for a column pruning left out of the rows.
func (p *plan) outputName(side int, col string) (string, bool) {
	if o := p.sides[side].out; o != nil && !o[col] {
		return "", false
	}
	return OutputName(p.spec.Type, [2]stream.Schema{p.sides[0].full, p.sides[1].full},
		[2]string{p.sides[0].Alias, p.sides[1].Alias}, side, col)
}

// outputSchema is the joined rows: the left columns then the right ones
// (a left semi join: the left ones), named by OutputName, nullable on a
// side the join may fill with nulls.
func (p *plan) outputSchema() (stream.Schema, []outCol) {
	var s stream.Schema
	var cols []outCol
	sides := []int{stream.LeftSide, stream.RightSide}
	if p.spec.Type == LeftSemi {
		sides = sides[:1]
	}
	for _, i := range sides {
		nullable := p.spec.Type.preserves(1 - i)
		// In the side's order, whatever order the state stores its
		// columns in (a plan storing a recorded state's columns).
		for _, f := range p.sides[i].full.Fields {
			j := fieldIndex(p.sides[i].Schema, f.Name)
			if j < 0 {
				continue // pruned and not stored
			}
			var ok bool
			if f.Name, ok = p.outputName(i, f.Name); !ok {
				continue // pruned: the state stores it, the rows leave it out
			}
			f.Nullable = f.Nullable || nullable
			s.Fields = append(s.Fields, f)
			cols = append(cols, outCol{side: i, col: j})
		}
	}
	return s, cols
}

func sideName(i int) string {
	if i == stream.LeftSide {
		return "left"
	}
	return "right"
}

// String renders the join for errors and the query shape.
func (p *plan) String() string {
	var conds []string
	for k := range p.spec.Left.Keys {
		conds = append(conds, p.spec.Left.Alias+"."+p.spec.Left.Keys[k]+" = "+p.spec.Right.Alias+"."+p.spec.Right.Keys[k])
	}
	for _, b := range p.spec.Range {
		conds = append(conds, strings.NewReplacer("left.", p.spec.Left.Alias+".", "right.", p.spec.Right.Alias+".").Replace(b.String()))
	}
	return fmt.Sprintf("%s join %s, %s on %s", p.spec.Type, p.spec.Left.Alias, p.spec.Right.Alias, strings.Join(conds, " AND "))
}

// keyColumns are the equi-join key pairs, rendered for the query shape:
// "a.k = b.k".
func (p *plan) keyColumns() []string {
	var ks []string
	for k := range p.spec.Left.Keys {
		ks = append(ks, p.spec.Left.Keys[k]+"="+p.spec.Right.Keys[k])
	}
	return slices.Clip(ks)
}
