package files

import (
	"fmt"
	"strings"
	"time"
)

// pattern is a compiled Spark datetime pattern (java.time's
// DateTimeFormatter letters as Spark 3 accepts them for parsing): y, M, d,
// H, h, a, m, s, S (fraction), X, x and Z (offsets), quoted literals
// ('T', ” for a quote), optional sections [...], any other non-letter as a
// literal. Letters outside this set are refused when the option is parsed.
type pattern []patItem

type patItem struct {
	letter byte    // 0: literal
	count  int     // repetitions of the letter
	lit    string  // literal text
	opt    pattern // an optional section (letter 0, lit "")
}

// compilePattern parses a pattern; the error says which letter or quote is
// wrong.
func compilePattern(s string) (pattern, error) {
	p, rest, err := compileUntil(s, false)
	if err != nil {
		return nil, err
	}
	if rest != "" {
		return nil, fmt.Errorf("unbalanced ']'")
	}
	return p, nil
}

func compileUntil(s string, inOpt bool) (pattern, string, error) {
	var out pattern
	for len(s) > 0 {
		c := s[0]
		switch {
		case c == '[':
			sub, rest, err := compileUntil(s[1:], true)
			if err != nil {
				return nil, "", err
			}
			out = append(out, patItem{opt: sub})
			s = rest
		case c == ']':
			if !inOpt {
				return nil, "", fmt.Errorf("unbalanced ']'")
			}
			return out, s[1:], nil
		case c == '\'':
			end := 1
			var lit strings.Builder
			for {
				if end >= len(s) {
					return nil, "", fmt.Errorf("unterminated quote")
				}
				if s[end] == '\'' {
					if end+1 < len(s) && s[end+1] == '\'' {
						lit.WriteByte('\'')
						end += 2
						continue
					}
					break
				}
				lit.WriteByte(s[end])
				end++
			}
			if end == 1 {
				lit.WriteByte('\'') // '' is a quote
			}
			out = append(out, patItem{lit: lit.String()})
			s = s[end+1:]
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			n := 1
			for n < len(s) && s[n] == c {
				n++
			}
			if !strings.ContainsRune("yMdHhamsSXxZu", rune(c)) {
				return nil, "", fmt.Errorf("pattern letter %q is not supported", c)
			}
			if c == 'u' {
				c = 'y'
			}
			out = append(out, patItem{letter: c, count: n})
			s = s[n:]
		default:
			out = append(out, patItem{lit: string(c)})
			s = s[1:]
		}
	}
	if inOpt {
		return nil, "", fmt.Errorf("unterminated '['")
	}
	return out, "", nil
}

// fields being parsed.
type tsFields struct {
	year, month, day, hour, min, sec, nanos int
	pm, hasAMPM, hour12                     bool
	offset                                  int // seconds east of UTC
}

// parse parses s (whole) as a timestamp in microseconds since the epoch;
// a missing zone is UTC (spark.sql.session.timeZone UTC).
func (p pattern) parse(s string) (int64, bool) {
	f := tsFields{year: 1970, month: 1, day: 1}
	rest, ok := p.match(s, &f)
	if !ok || rest != "" {
		return 0, false
	}
	if f.hasAMPM || f.hour12 {
		if f.hour < 1 || f.hour > 12 {
			return 0, false
		}
		f.hour %= 12
		if f.pm {
			f.hour += 12
		}
	}
	return civilMicros(f)
}

func civilMicros(f tsFields) (int64, bool) {
	if f.month < 1 || f.month > 12 || f.day < 1 || f.day > 31 || f.hour > 23 || f.min > 59 || f.sec > 59 {
		return 0, false
	}
	t := time.Date(f.year, time.Month(f.month), f.day, f.hour, f.min, f.sec, f.nanos, time.UTC)
	if t.Day() != f.day { // Feb 30
		return 0, false
	}
	return t.UnixMicro() - int64(f.offset)*1e6, true
}

func digits(s string, min, max int) (int, string, bool) {
	n, v := 0, 0
	for n < len(s) && n < max && s[n] >= '0' && s[n] <= '9' {
		v = v*10 + int(s[n]-'0')
		n++
	}
	if n < min {
		return 0, s, false
	}
	return v, s[n:], true
}

func (p pattern) match(s string, f *tsFields) (string, bool) {
	for _, it := range p {
		var ok bool
		switch {
		case it.opt != nil:
			save := *f
			if rest, ok := it.opt.match(s, f); ok {
				s = rest
			} else {
				*f = save
			}
			continue
		case it.letter == 0:
			if !strings.HasPrefix(s, it.lit) {
				return s, false
			}
			s = s[len(it.lit):]
			continue
		}
		n := it.count
		switch it.letter {
		case 'y':
			if n == 2 {
				var y int
				y, s, ok = digits(s, 2, 2)
				f.year = 2000 + y
			} else {
				f.year, s, ok = digits(s, max(n, 4), 9)
			}
		case 'M':
			f.month, s, ok = digits(s, n, 2)
		case 'd':
			f.day, s, ok = digits(s, n, 2)
		case 'H':
			f.hour, s, ok = digits(s, n, 2)
		case 'h':
			f.hour, s, ok = digits(s, n, 2)
			f.hour12 = true
		case 'm':
			f.min, s, ok = digits(s, n, 2)
		case 's':
			f.sec, s, ok = digits(s, n, 2)
		case 'S':
			var v int
			rest := s
			v, s, ok = digits(s, n, n)
			if ok {
				for k := len(rest) - len(s); k < 9; k++ {
					v *= 10
				}
				f.nanos = v
			}
		case 'a':
			switch {
			case strings.HasPrefix(s, "AM"), strings.HasPrefix(s, "am"):
				f.pm, ok = false, true
			case strings.HasPrefix(s, "PM"), strings.HasPrefix(s, "pm"):
				f.pm, ok = true, true
			}
			if ok {
				s = s[2:]
				f.hasAMPM = true
			}
		case 'X', 'x', 'Z':
			f.offset, s, ok = parseOffset(s, it.letter, n)
		}
		if !ok {
			return s, false
		}
	}
	return s, true
}

// parseOffset parses a zone offset: X allows Z for zero; XXX and ZZZZZ
// want a colon (+hh:mm), XX and Z +hhmm, X +hh[mm].
func parseOffset(s string, letter byte, n int) (int, string, bool) {
	if (letter == 'X' || (letter == 'Z' && n >= 4)) && strings.HasPrefix(s, "Z") {
		return 0, s[1:], true
	}
	if s == "" || (s[0] != '+' && s[0] != '-') {
		return 0, s, false
	}
	sign := 1
	if s[0] == '-' {
		sign = -1
	}
	h, rest, ok := digits(s[1:], 2, 2)
	if !ok {
		return 0, s, false
	}
	m := 0
	colon := (letter == 'X' || letter == 'x') && n >= 3 || letter == 'Z' && n >= 5
	switch {
	case colon:
		if !strings.HasPrefix(rest, ":") {
			return 0, s, false
		}
		m, rest, ok = digits(rest[1:], 2, 2)
	case n >= 2 || letter == 'Z':
		m, rest, ok = digits(rest, 2, 2)
	default:
		if mm, r2, ok2 := digits(rest, 2, 2); ok2 {
			m, rest = mm, r2
		}
	}
	if !ok || h > 18 || m > 59 {
		return 0, s, false
	}
	return sign * (h*3600 + m*60), rest, true
}

// parseDefaultTimestamp is Spark's DateTimeUtils.stringToTimestamp, the
// parse of a timestamp column without timestampFormat: yyyy[-[m]m[-[d]d]]
// then optionally ' ' or 'T' and [h]h:[m]m[:[s]s[.fraction]], then
// optionally a zone (Z, UTC, GMT, +hh[:mm], a region id such as
// Europe/Paris); surrounding spaces are ignored; no zone is UTC.
func parseDefaultTimestamp(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	f := tsFields{month: 1, day: 1}
	var ok bool
	neg := false
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		neg = s[0] == '-'
		s = s[1:]
	}
	if f.year, s, ok = digits(s, 4, 7); !ok {
		return 0, false
	}
	if neg {
		f.year = -f.year
	}
	if strings.HasPrefix(s, "-") {
		if f.month, s, ok = digits(s[1:], 1, 2); !ok {
			return 0, false
		}
		if strings.HasPrefix(s, "-") {
			if f.day, s, ok = digits(s[1:], 1, 2); !ok {
				return 0, false
			}
		}
	}
	if s != "" && (s[0] == ' ' || s[0] == 'T') {
		s = s[1:]
		if s != "" {
			if f.hour, s, ok = digits(s, 1, 2); !ok || !strings.HasPrefix(s, ":") {
				return 0, false
			}
			if f.min, s, ok = digits(s[1:], 1, 2); !ok {
				return 0, false
			}
			if strings.HasPrefix(s, ":") {
				if f.sec, s, ok = digits(s[1:], 1, 2); !ok {
					return 0, false
				}
				if strings.HasPrefix(s, ".") {
					rest := s[1:]
					var v int
					if v, s, ok = digits(rest, 1, 9); !ok {
						return 0, false
					}
					for k := len(rest) - len(s); k < 9; k++ {
						v *= 10
					}
					f.nanos = v
					for s != "" && s[0] >= '0' && s[0] <= '9' { // beyond nanoseconds: dropped
						s = s[1:]
					}
				}
			}
		}
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
	case s == "Z" || s == "UTC" || s == "GMT" || s == "UT":
	case s[0] == '+' || s[0] == '-':
		off, rest, ok := parseOffset(s, 'X', 3)
		if !ok {
			if off, rest, ok = parseOffset(s, 'X', 1); !ok {
				return 0, false
			}
		}
		if rest != "" {
			return 0, false
		}
		f.offset = off
	default:
		for _, p := range []string{"UTC", "GMT", "UT"} {
			if strings.HasPrefix(s, p) && len(s) > len(p) && (s[len(p)] == '+' || s[len(p)] == '-') {
				off, rest, ok := parseOffset(s[len(p):], 'X', 3)
				if !ok || rest != "" {
					return 0, false
				}
				f.offset = off
				return civilMicros(f)
			}
		}
		loc, err := time.LoadLocation(s)
		if err != nil || s == "Local" {
			return 0, false
		}
		us, ok := civilMicros(f)
		if !ok {
			return 0, false
		}
		t := time.UnixMicro(us).UTC()
		lt := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc)
		return lt.UnixMicro(), true
	}
	return civilMicros(f)
}
