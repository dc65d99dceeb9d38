package deltalog

import (
	"fmt"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Implemented protocol: reader 1, writer 2, no table features (but
// timestampNtz, OnlyNtz).
const (
	ReaderVersion = 1
	WriterVersion = 2
)

// PrimitiveNames maps the engine's types to Delta's primitive names (the
// table of sink/delta's types.go); DECIMAL is decimal(p,s).
var PrimitiveNames = map[stream.Type]string{stream.Int64: "long", stream.Int32: "integer", stream.Int16: "short",
	stream.Int8: "byte", stream.Boolean: "boolean", stream.Float32: "float", stream.Float64: "double",
	stream.String: "string", stream.Binary: "binary", stream.Date: "date", stream.Timestamp: "timestamp",
	stream.TimestampNTZ: "timestamp_ntz"}

// StreamTypeOf is the engine type of a Delta primitive type name (long,
// decimal(10,2), timestamp_ntz, ...); false for a name that is not one.
func StreamTypeOf(name string) (stream.Type, bool) {
	for t, n := range PrimitiveNames {
		if n == name {
			return t, true
		}
	}
	var p, s int
	if n, err := fmt.Sscanf(name, "decimal(%d,%d)", &p, &s); err == nil && n == 2 &&
		p >= 1 && p <= stream.MaxDecimalPrecision && s >= 0 && s <= p && fmt.Sprintf("decimal(%d,%d)", p, s) == name {
		return stream.DecimalOf(p, s), true
	}
	return 0, false
}

// FeatureTimestampNtz is the table feature of a timestamp_ntz column.
const FeatureTimestampNtz = "timestampNtz"

// OnlyNtz reports whether a protocol at version v (the table-features
// version featuresAt) names no feature but timestampNtz, the one feature
// ethstream implements (it reads and writes TIMESTAMP_NTZ columns).
func OnlyNtz(v, featuresAt int, features []string) bool {
	if v != featuresAt {
		return false
	}
	for _, f := range features {
		if f != FeatureTimestampNtz {
			return false
		}
	}
	return true
}

// CheckReadProtocol refuses a protocol this reader does not implement;
// path is the log directory, for the error.
func CheckReadProtocol(p Protocol, path string) error {
	if p.MinReaderVersion > ReaderVersion && !OnlyNtz(p.MinReaderVersion, 3, p.ReaderFeatures) {
		return errcodeNew(CodeUnsupportedProtocol, path, RemedyProtocol,
			"table needs reader version %d with features %v; ethstream reads version %d without features",
			p.MinReaderVersion, p.ReaderFeatures, ReaderVersion)
	}
	return nil
}

// statsJSONValue turns a checkpoint's typed stats_parsed into the values of
// the JSON stats string: timestamps as ISO-8601 cut to milliseconds.
func statsJSONValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e == nil {
				continue // absent stat, as in the JSON form
			}
			out[k] = statsJSONValue(e)
		}
		return out
	case time.Time:
		return FormatStatsTime(x)
	}
	return v
}

// FormatStatsTime renders a timestamp the way Spark writes it in stats:
// ISO-8601 UTC, cut (not rounded) to milliseconds.
func FormatStatsTime(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
}
