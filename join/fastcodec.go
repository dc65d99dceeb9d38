package join

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/ethstream/ethstream/stream"
)

// The fast decoders read exactly the text format 1's encoder wrote
// (rowText; doc.go, State layout) in one pass: the object's names in the side's
// column order, compared in place, no whitespace, numbers parsed from the
// slice. They report ok=false on any deviation, and the callers then run
// the generic encoding/json decoders, so every value the generic decoder
// accepts still decodes to the same row and every value it refuses is
// still refused with its error. The generic decoder walks encoding/json's
// tokens; a checkpoint written in format 1 reads its rows through these
// until the join rewrites them in format 2.

// fastDecodeRow is decodeRow for format 1's own text; ok=false means
// "not recognised", not "malformed". fields must pass fastNames, which the
// plan checks once per side (sidePlan.fast), not once per row.
func fastDecodeRow(fields []stream.Field, val []byte) (r row, matched bool, ok bool) {
	s, ok := fastStringValue(val)
	if !ok || len(s) == 0 || s[0] != '{' {
		return nil, false, false
	}
	p := 1
	r = make(row, len(fields))
	for j, f := range fields {
		if p, ok = fastName(s, p, f.Name); !ok {
			return nil, false, false
		}
		if hasPrefixAt(s, p, "null") {
			p += len("null")
			r[j] = nullValue
		} else {
			switch f.Type.Storage() {
			case stream.String:
				var v string
				if v, p, ok = fastString(s, p); !ok {
					return nil, false, false
				}
				r[j] = strValue(v)
			case stream.Float64:
				var v float64
				if v, p, ok = fastFloat(s, p); !ok {
					return nil, false, false
				}
				r[j] = floatValue(v)
			default:
				e := numberEnd(s, p, false)
				if e < 0 {
					return nil, false, false
				}
				v, err := strconv.ParseInt(s[p:e], 10, 64)
				if err != nil {
					return nil, false, false
				}
				r[j], p = intValue(v), e
			}
		}
		if p >= len(s) || s[p] != ',' {
			return nil, false, false
		}
		p++
	}
	switch s[p:] {
	case `"matched":true}`:
		return r, true, true
	case `"matched":false}`:
		return r, false, true
	}
	return nil, false, false
}

// fastDecodeCount is decodeCount for format 1's own text.
func fastDecodeCount(val []byte) (int64, bool) {
	s, ok := fastStringValue(val)
	const pre = `{"value":`
	if !ok || len(s) < len(pre)+2 || s[:len(pre)] != pre || s[len(s)-1] != '}' {
		return 0, false
	}
	num := s[len(pre) : len(s)-1]
	if numberEnd(num, 0, false) != len(num) || num[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// fastStringValue unwraps state.AppendStringValue as state.DecodeValue
// does (a uvarint length, then exactly that many bytes).
func fastStringValue(val []byte) (string, bool) {
	l, n := binary.Uvarint(val)
	if n <= 0 || l != uint64(len(val)-n) {
		return "", false
	}
	return string(val[n:]), true
}

// fastNames reports whether the fields' names are ones the in-place
// comparison reads as the generic decoder does: each a JSON string with
// nothing to unescape, valid UTF-8, and unique and not "matched" (the
// generic decoder then decides).
func fastNames(fields []stream.Field) bool {
	for i, f := range fields {
		if f.Name == "matched" || !utf8.ValidString(f.Name) {
			return false
		}
		for k := 0; k < len(f.Name); k++ {
			if c := f.Name[k]; c < 0x20 || c == '"' || c == '\\' {
				return false
			}
		}
		for _, g := range fields[:i] {
			if g.Name == f.Name {
				return false
			}
		}
	}
	return true
}

// fastName reads `"name":` at p and returns the position after it.
func fastName(s string, p int, name string) (int, bool) {
	e := p + 1 + len(name)
	if e+1 >= len(s) || s[p] != '"' || s[p+1:e] != name || s[e] != '"' || s[e+1] != ':' {
		return 0, false
	}
	return e + 2, true
}

func hasPrefixAt(s string, p int, pre string) bool {
	return len(s)-p >= len(pre) && s[p:p+len(pre)] == pre
}

// fastString reads a JSON string at p. One without a backslash is taken
// as it stands (after the checks encoding/json makes: no control byte,
// valid UTF-8, which it would otherwise replace); one with escapes is
// unquoted by encoding/json itself.
func fastString(s string, p int) (string, int, bool) {
	if p >= len(s) || s[p] != '"' {
		return "", 0, false
	}
	escaped := false
	for i := p + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			escaped = true
			i++
		case c < 0x20:
			return "", 0, false
		case c == '"':
			tok := s[p : i+1]
			if !escaped {
				v := tok[1 : len(tok)-1]
				if !utf8.ValidString(v) {
					return "", 0, false
				}
				return v, i + 1, true
			}
			var v string
			if err := json.Unmarshal([]byte(tok), &v); err != nil {
				return "", 0, false
			}
			return v, i + 1, true
		}
	}
	return "", 0, false
}

// fastFloat reads a float64 at p: a JSON number, or a quoted string
// strconv.ParseFloat reads (rowText quotes NaN and ±Inf).
func fastFloat(s string, p int) (float64, int, bool) {
	if p < len(s) && s[p] == '"' {
		t, e, ok := fastString(s, p)
		if !ok {
			return 0, 0, false
		}
		v, err := strconv.ParseFloat(t, 64)
		return v, e, err == nil
	}
	e := numberEnd(s, p, true)
	if e < 0 {
		return 0, 0, false
	}
	v, err := strconv.ParseFloat(s[p:e], 64)
	return v, e, err == nil
}

// numberEnd returns the end of the JSON number at p (RFC 8259:
// -?(0|[1-9][0-9]*), then with frac a fraction and exponent if any), or
// -1 if none starts there.
func numberEnd(s string, p int, frac bool) int {
	if p < len(s) && s[p] == '-' {
		p++
	}
	switch {
	case p < len(s) && s[p] == '0':
		p++
	case p < len(s) && s[p] >= '1' && s[p] <= '9':
		p = digits(s, p)
	default:
		return -1
	}
	if !frac {
		return p
	}
	if p < len(s) && s[p] == '.' {
		if q := digits(s, p+1); q > p+1 {
			p = q
		} else {
			return -1
		}
	}
	if p < len(s) && (s[p] == 'e' || s[p] == 'E') {
		p++
		if p < len(s) && (s[p] == '+' || s[p] == '-') {
			p++
		}
		q := digits(s, p)
		if q == p {
			return -1
		}
		p = q
	}
	return p
}

func digits(s string, p int) int {
	for p < len(s) && s[p] >= '0' && s[p] <= '9' {
		p++
	}
	return p
}
