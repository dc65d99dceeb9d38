package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ethstream/ethstream/internal/deltalog"
	"github.com/ethstream/ethstream/stream"
)

// The column types of the sink's tables, one row per engine type:
//
//	engine         Delta schema     Parquet (as Spark writes it)          stats min/max
//	int64          long             INT64                                 number
//	int (Int32)    integer          INT32                                 number
//	smallint       short            INT32 INT(16)                         number
//	tinyint        byte             INT32 INT(8)                          number
//	boolean        boolean          BOOLEAN                               none (nullCount only)
//	float          float            FLOAT                                 number (no NaN/Inf)
//	float64        double           DOUBLE                                number (no NaN/Inf)
//	decimal(p,s)   decimal(p,s)     INT32 (p <= 9), INT64 (p <= 18),      number (plain, s digits)
//	                                FIXED_LEN_BYTE_ARRAY otherwise (of
//	                                columnar.DecimalFixedLen(p) bytes),
//	                                DECIMAL(p,s)
//	string         string           BYTE_ARRAY STRING                     string, 32 characters
//	binary         binary           BYTE_ARRAY                            none (nullCount only)
//	date           date             INT32 DATE                            "yyyy-MM-dd"
//	timestamp      timestamp        INT64 TIMESTAMP(MICROS, UTC)          ISO-8601 in ms, UTC
//	timestamp_ntz  timestamp_ntz    INT64 TIMESTAMP(MICROS, local)        ISO-8601 in ms, no zone
//
// A table with a timestamp_ntz column needs the timestampNtz table
// feature: protocol (3, 7) with it as reader and writer feature.

// deltaNames maps the engine's types to Delta's primitive names.
var deltaNames = deltalog.PrimitiveNames

// deltaPrimitive maps a column type to its Delta (Spark) type per the
// protocol's primitive types.
func deltaPrimitive(t stream.Type) (string, error) {
	if t.Kind() == stream.Decimal && t != stream.Decimal {
		return fmt.Sprintf("decimal(%d,%d)", t.Precision(), t.Scale()), nil
	}
	if n, ok := deltaNames[t]; ok {
		return n, nil
	}
	return "", fmt.Errorf("no Delta type for %s", t)
}

// StreamTypeOf is the engine type of a Delta primitive type name (long,
// decimal(10,2), timestamp_ntz, ...); false for a name that is not one.
func StreamTypeOf(name string) (stream.Type, bool) { return deltalog.StreamTypeOf(name) }

// streamOfDelta is the engine type of a Delta primitive; false for one
// the sink does not write.
func streamOfDelta(name string) (stream.Type, bool) { return deltalog.StreamTypeOf(name) }

// featureTimestampNtz is the table feature of a timestamp_ntz column.
const featureTimestampNtz = deltalog.FeatureTimestampNtz

// protocolFor is the protocol a new table of schema s needs: (1, 2), or
// (3, 7) with timestampNtz when a column is timestamp_ntz.
func protocolFor(s Schema) Protocol {
	for _, f := range s.Fields {
		if f.Type.Primitive == "timestamp_ntz" {
			return Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
				ReaderFeatures: []string{featureTimestampNtz}, WriterFeatures: []string{featureTimestampNtz}}
		}
	}
	return Protocol{MinReaderVersion: ReaderVersion, MinWriterVersion: WriterVersion}
}

// statText renders a min or max of a type with min/max stats as JSON;
// ok is false for a type Delta keeps no min/max of (boolean, binary).
func statText(t stream.Type, v *stream.Column, i int) (string, bool) {
	switch t.Kind() {
	case stream.Decimal:
		return v.Decimals[i].Text(t.Scale()), true
	case stream.Date:
		return jsonStr(time.Unix(v.Int64s[i]*86400, 0).UTC().Format(time.DateOnly)), true
	case stream.TimestampNTZ:
		return jsonStr(time.UnixMicro(v.Int64s[i]).UTC().Format("2006-01-02T15:04:05.000")), true
	case stream.Float32:
		js, _ := json.Marshal(float32(v.Float64s[i]))
		return string(js), true
	case stream.Boolean, stream.Binary:
		return "", false
	}
	return strconv.FormatInt(v.Int64s[i], 10), true
}

// widens reports whether a column of type from is written unchanged into a
// table column of type to: a narrower integer into long, a float into
// double (the same values in the same storage).
func widens(from, to stream.Type) bool {
	switch from {
	case stream.Int8, stream.Int16, stream.Int32:
		return to == stream.Int64
	case stream.Float32:
		return to == stream.Float64
	}
	return false
}

// widenToTable gives the output's narrow integer and float columns the
// table's long or double where the existing table has those: tables
// written before the engine had INT, SMALLINT, TINYINT and FLOAT columns
// hold them as long and double, and keep taking them (Delta's safe
// upcast on write). Any other difference is left for the schema check.
func widenToTable(ctx context.Context, t *Table, out stream.Schema) stream.Schema {
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		return out // the caller's own Snapshot reports it
	}
	var widened stream.Schema
	for i, f := range out.Fields {
		tf, ok := s.Schema.Field(f.Name)
		if !ok {
			continue
		}
		if to, ok := streamOfDelta(tf.Type.Primitive); ok && widens(f.Type, to) {
			if widened.Fields == nil {
				widened = stream.Schema{Fields: slices.Clone(out.Fields), Key: out.Key}
			}
			widened.Fields[i].Type = to
		}
	}
	if widened.Fields == nil {
		return out
	}
	return widened
}
