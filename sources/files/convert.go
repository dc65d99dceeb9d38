package files

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/sources/ddl"
	"github.com/ethstream/ethstream/stream"
)

// cell is one value on its way into a column.
type cell struct {
	null bool
	i    int64
	f    float64
	s    string
	d    stream.Dec128
}

var nullCell = cell{null: true}

// intBits is the width of an integer Spark type (a value beyond it is
// malformed, as Spark's toInt refuses it).
func intBits(k ddl.Kind) int {
	switch k {
	case ddl.Byte:
		return 8
	case ddl.Short:
		return 16
	case ddl.Int:
		return 32
	}
	return 64
}

// specialDouble is Spark's CSV nanValue, positiveInf and negativeInf
// defaults and the spellings Java's Double.parseDouble takes.
func specialDouble(s string) (float64, bool) {
	switch s {
	case "NaN":
		return math.NaN(), true
	case "Inf", "+Inf", "Infinity", "+Infinity":
		return math.Inf(1), true
	case "-Inf", "-Infinity":
		return math.Inf(-1), true
	}
	return 0, false
}

// parseDouble parses a decimal floating-point number as Java does (no
// hexadecimal, no underscores, no inf/nan spellings of Go's own).
func parseDouble(s string) (float64, bool) {
	if v, ok := specialDouble(s); ok {
		return v, true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// parseDate reads Spark's default date text, yyyy-MM-dd (a year of up to
// 4 digits, a month and day of 1 or 2, as Spark's default parser takes
// them), as days since the epoch.
func parseDate(s string) (int64, bool) {
	parts := strings.Split(strings.TrimSpace(s), "-")
	if len(parts) != 3 || len(parts[0]) == 0 || len(parts[0]) > 4 || len(parts[1]) == 0 || len(parts[1]) > 2 || len(parts[2]) == 0 || len(parts[2]) > 2 {
		return 0, false
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, false
		}
		v[i] = n
	}
	t := time.Date(v[0], time.Month(v[1]), v[2], 0, 0, 0, 0, time.UTC)
	if t.Year() != v[0] || int(t.Month()) != v[1] || t.Day() != v[2] {
		return 0, false
	}
	return t.Unix() / 86400, true
}

// textCell converts a text value (a CSV field, a partition value) to c's
// type; ok is false when the text is not a value of that type.
func (r *reader) textCell(c *column, s string) (cell, bool) {
	switch c.typ.Kind() {
	case stream.Int64, stream.Int32, stream.Int16, stream.Int8:
		v, err := strconv.ParseInt(s, 10, intBits(c.kind))
		return cell{i: v}, err == nil
	case stream.Boolean:
		// Spark's CSV reads s.toBoolean: true or false, any case.
		switch strings.ToLower(s) {
		case "true":
			return cell{i: 1}, true
		case "false":
			return cell{i: 0}, true
		}
		return nullCell, false
	case stream.Decimal:
		v, ok := stream.ParseDecimal(s, c.typ.Precision(), c.typ.Scale())
		return cell{d: v}, ok && s != ""
	case stream.Date:
		v, ok := parseDate(s)
		return cell{i: v}, ok
	case stream.TimestampNTZ:
		v, ok := parseDefaultTimestamp(s)
		return cell{i: v}, ok
	case stream.Float64, stream.Float32:
		v, ok := parseDouble(s)
		if c.kind == ddl.Float {
			v = float64(float32(v))
		}
		return cell{f: v}, ok
	case stream.Timestamp:
		v, ok := r.timestamp(s)
		return cell{i: v}, ok
	}
	return cell{s: s}, true
}

func (r *reader) timestamp(s string) (int64, bool) {
	if r.tsPattern != nil {
		return r.tsPattern.parse(s)
	}
	return parseDefaultTimestamp(s)
}

// jsonCell converts a JSON value to c's type as Spark's JacksonParser
// does: null is null; an integer column takes an integral number in
// range; a floating-point column any number, or "NaN", "Infinity",
// "-Infinity" as strings; a string column a string, or the compact JSON
// text of any other value; a timestamp column a string (timestampFormat,
// or Spark's default parsing) or an integral number of seconds.
func (r *reader) jsonCell(c *column, raw json.RawMessage) (cell, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nullCell, false
	}
	if string(raw) == "null" {
		return nullCell, true
	}
	first := raw[0]
	isNum := first == '-' || first >= '0' && first <= '9'
	switch c.typ.Kind() {
	case stream.Int64, stream.Int32, stream.Int16, stream.Int8:
		if !isNum {
			return nullCell, false
		}
		v, err := strconv.ParseInt(string(raw), 10, intBits(c.kind))
		return cell{i: v}, err == nil
	case stream.Boolean:
		switch string(raw) {
		case "true":
			return cell{i: 1}, true
		case "false":
			return cell{i: 0}, true
		}
		return nullCell, false
	case stream.Decimal:
		// A number, or a string holding one (Spark's JacksonParser takes both).
		text := string(raw)
		if first == '"' && json.Unmarshal(raw, &text) != nil {
			return nullCell, false
		}
		if !isNum && first != '"' {
			return nullCell, false
		}
		v, ok := stream.ParseDecimal(text, c.typ.Precision(), c.typ.Scale())
		return cell{d: v}, ok
	case stream.Date, stream.Binary, stream.TimestampNTZ:
		var s string
		if first != '"' || json.Unmarshal(raw, &s) != nil {
			return nullCell, false
		}
		switch c.typ {
		case stream.Date:
			v, ok := parseDate(s)
			return cell{i: v}, ok
		case stream.TimestampNTZ:
			v, ok := parseDefaultTimestamp(s)
			return cell{i: v}, ok
		}
		// Spark's JSON binary is base64 (Jackson's getBinaryValue).
		b, err := base64.StdEncoding.DecodeString(s)
		return cell{s: string(b)}, err == nil
	case stream.Float64, stream.Float32:
		var v float64
		switch {
		case isNum:
			f, err := strconv.ParseFloat(string(raw), 64)
			if err != nil && !isRangeErr(err) {
				return nullCell, false
			}
			v = f
		case first == '"':
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return nullCell, false
			}
			f, ok := specialDouble(s)
			if !ok || s == "Inf" || s == "+Inf" || s == "-Inf" {
				return nullCell, false
			}
			v = f
		default:
			return nullCell, false
		}
		if c.kind == ddl.Float {
			v = float64(float32(v))
		}
		return cell{f: v}, true
	case stream.Timestamp:
		switch {
		case isNum:
			v, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil || v > math.MaxInt64/1_000_000 || v < math.MinInt64/1_000_000 {
				return nullCell, false
			}
			return cell{i: v * 1e6}, true
		case first == '"':
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return nullCell, false
			}
			v, ok := r.timestamp(s)
			return cell{i: v}, ok
		}
		return nullCell, false
	}
	if first == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nullCell, false
		}
		return cell{s: s}, true
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nullCell, false
	}
	return cell{s: strings.Clone(b.String())}, true
}
