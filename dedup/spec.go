package dedup

import (
	"slices"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// Operator names of the stateOperators entry and the state schema, Spark's
// shortName of each physical operator.
const (
	OperatorName                = "dedupe"
	OperatorNameWithinWatermark = "dedupeWithinWatermark"
)

// MetricDroppedDuplicates is the custom metric counting the rows dropped as
// duplicates, Spark's numDroppedDuplicateRows.
const MetricDroppedDuplicates = "numDroppedDuplicateRows"

// ValueExpiresAt is the value column of dropDuplicatesWithinWatermark's state.
const ValueExpiresAt = "expiresAtMicros"

// Spec declares a deduplication.
type Spec struct {
	// Columns are the deduplication columns; empty means every input
	// column, as dropDuplicates() without arguments.
	Columns []string
	// Input is the schema of the rows the operator reads.
	Input stream.Schema
	// WatermarkColumn and WatermarkDelay are the query's watermark (its
	// event-time column); WatermarkColumn is empty without one.
	WatermarkColumn string
	WatermarkDelay  time.Duration
	// WithinWatermark makes it dropDuplicatesWithinWatermark, which needs
	// a watermark.
	WithinWatermark bool
}

// plan is a validated spec.
type plan struct {
	spec   Spec
	cols   []string
	types  []stream.Type
	schema state.Schema
	// evictCol is the index in cols of the event-time column when
	// dropDuplicates evicts by it, else -1.
	evictCol int
	delayUs  int64
}

func invalid(format string, args ...any) error {
	return errcode.New(errcode.InvalidArgument, "", "fix the deduplication's columns or watermark", format, args...)
}

func newPlan(spec Spec) (*plan, error) {
	p := &plan{spec: spec, evictCol: -1, delayUs: spec.WatermarkDelay.Microseconds()}
	cols := spec.Columns
	if len(cols) == 0 {
		for _, f := range spec.Input.Fields {
			cols = append(cols, f.Name)
		}
	}
	if spec.WithinWatermark && spec.WatermarkColumn == "" {
		// Spark: dropDuplicatesWithinWatermark needs a watermark.
		return nil, invalid("dropDuplicatesWithinWatermark without a watermark: define one with withWatermark first")
	}
	if spec.WatermarkColumn != "" {
		if f := spec.Input.Field(spec.WatermarkColumn); f == nil || f.Type != stream.Timestamp {
			return nil, invalid("watermark column %q is not a timestamp of the rows %s", spec.WatermarkColumn, spec.Input)
		}
	}
	name := OperatorName
	if spec.WithinWatermark {
		name = OperatorNameWithinWatermark
	}
	p.schema = state.Schema{OperatorName: name, Spec: "format=1"}
	for _, c := range cols {
		if slices.Contains(p.cols, c) {
			continue // Spark dedups the names too
		}
		f := spec.Input.Field(c)
		if f == nil {
			return nil, invalid("dropDuplicates column %q is not a column of the rows %s", c, spec.Input)
		}
		sf := state.Field{Name: c, Type: state.RecordedType(f.Type)}
		switch keyClass(f.Type) {
		case stream.Int64:
			sf.Nullable = true
		case stream.String:
		case stream.Float64:
			// A null Float64 key is not representable; a null is refused
			// by Process.
		default:
			return nil, invalid("dropDuplicates column %q has type %v, which the state cannot key", c, f.Type)
		}
		if c == spec.WatermarkColumn && !spec.WithinWatermark {
			p.evictCol = len(p.cols)
		}
		p.cols = append(p.cols, c)
		p.types = append(p.types, f.Type)
		p.schema.Key = append(p.schema.Key, sf)
	}
	if spec.WithinWatermark {
		p.schema.Value = []state.Field{{Name: ValueExpiresAt, Type: stream.Timestamp}}
	}
	return p, nil
}

func (p *plan) String() string {
	if p.spec.WithinWatermark {
		return "dropDuplicatesWithinWatermark(" + strings.Join(p.cols, ", ") + ")"
	}
	return "dropDuplicates(" + strings.Join(p.cols, ", ") + ")"
}
