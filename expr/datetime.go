package expr

import (
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
)

// The session time zone is UTC: ethstream has no spark.sql.session.timeZone
// and every timestamp is read and written in UTC.

func ts(us int64) time.Time { return time.UnixMicro(us).UTC() }

// part is a field of a timestamp (a DATE argument is its midnight).
func part(f func(t time.Time) int) func(*compiler, Call, []node) (node, error) {
	return func(_ *compiler, call Call, args []node) (node, error) {
		a, err := want(call, args, Timestamp)
		if err != nil {
			return nil, err
		}
		return strict(call.Name, Int, a, call, func(_ *ctx, v []any) (any, error) {
			return int64(f(ts(v[0].(int64)))), nil
		}), nil
	}
}

func addDatetime() {
	fields := map[string]func(time.Time) int{
		"year":       func(t time.Time) int { return t.Year() },
		"quarter":    func(t time.Time) int { return (int(t.Month())-1)/3 + 1 },
		"month":      func(t time.Time) int { return int(t.Month()) },
		"day":        func(t time.Time) int { return t.Day() },
		"dayofmonth": func(t time.Time) int { return t.Day() },
		"dayofyear":  func(t time.Time) int { return t.YearDay() },
		"hour":       func(t time.Time) int { return t.Hour() },
		"minute":     func(t time.Time) int { return t.Minute() },
		"second":     func(t time.Time) int { return t.Second() },
		// dayofweek: 1 = Sunday .. 7 = Saturday.
		"dayofweek": func(t time.Time) int { return int(t.Weekday()) + 1 },
		// weekday: 0 = Monday .. 6 = Sunday.
		"weekday": func(t time.Time) int { return (int(t.Weekday()) + 6) % 7 },
	}
	for name, f := range fields {
		functions[name] = funcSpec{1, 1, part(f)}
	}
	functions["date_trunc"] = funcSpec{2, 2, dateTrunc}
	functions["to_date"] = funcSpec{1, 2, toDate}
	functions["to_timestamp"] = funcSpec{1, 2, toTimestamp}
	functions["date_format"] = funcSpec{2, 2, dateFormat}
	functions["unix_timestamp"] = funcSpec{1, 2, unixTimestamp}
	functions["timestamp_seconds"] = funcSpec{1, 1, func(c *compiler, call Call, args []node) (node, error) {
		if !args[0].typ().numeric() && args[0].typ() != Null {
			return nil, mismatch(call, "timestamp_seconds takes a number, not %s", args[0].typ())
		}
		return c.compile(Cast{X: call.Args[0], To: Timestamp})
	}}
	functions["date_add"] = funcSpec{2, 2, func(_ *compiler, call Call, args []node) (node, error) {
		a, err := want(call, args, Date, Int)
		if err != nil {
			return nil, err
		}
		return strict(call.Name, Date, a, call, func(_ *ctx, v []any) (any, error) { return v[0].(int64) + v[1].(int64), nil }), nil
	}}
	functions["date_sub"] = funcSpec{2, 2, func(_ *compiler, call Call, args []node) (node, error) {
		a, err := want(call, args, Date, Int)
		if err != nil {
			return nil, err
		}
		return strict(call.Name, Date, a, call, func(_ *ctx, v []any) (any, error) { return v[0].(int64) - v[1].(int64), nil }), nil
	}}
	functions["datediff"] = funcSpec{2, 2, func(_ *compiler, call Call, args []node) (node, error) {
		a, err := want(call, args, Date, Date)
		if err != nil {
			return nil, err
		}
		return strict(call.Name, Int, a, call, func(_ *ctx, v []any) (any, error) { return v[0].(int64) - v[1].(int64), nil }), nil
	}}
}

// dateTrunc is date_trunc(unit, ts): the timestamp truncated to the unit
// (YEAR/YYYY/YY, QUARTER, MONTH/MM/MON, WEEK (to Monday), DAY/DD, HOUR,
// MINUTE, SECOND, MILLISECOND, MICROSECOND; any case); another unit gives
// NULL, as in Spark.
func dateTrunc(_ *compiler, call Call, args []node) (node, error) {
	a, err := want(call, args, String, Timestamp)
	if err != nil {
		return nil, err
	}
	if unit, ok := constArg(call, 0); ok {
		var step int64
		switch strings.ToUpper(unit.(string)) {
		case "DAY", "DD":
			step = usPerDay
		case "HOUR":
			step = 3_600_000_000
		case "MINUTE":
			step = 60_000_000
		case "SECOND":
			step = 1_000_000
		case "MILLISECOND":
			step = 1000
		case "MICROSECOND":
			step = 1
		}
		if step > 0 {
			return &mapNode{x: a[1], t: Timestamp, src: call, i: func(us int64) int64 { return floorDiv(us, step) * step }}, nil
		}
	}
	return strict(call.Name, Timestamp, a, call, func(_ *ctx, v []any) (any, error) {
		us := v[1].(int64)
		t := ts(us)
		var out time.Time
		switch strings.ToUpper(v[0].(string)) {
		case "YEAR", "YYYY", "YY":
			out = time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
		case "QUARTER":
			out = time.Date(t.Year(), time.Month((int(t.Month())-1)/3*3+1), 1, 0, 0, 0, 0, time.UTC)
		case "MONTH", "MM", "MON":
			out = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		case "WEEK":
			d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
			out = d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
		case "DAY", "DD":
			return floorDiv(us, usPerDay) * usPerDay, nil
		case "HOUR":
			return floorDiv(us, 3_600_000_000) * 3_600_000_000, nil
		case "MINUTE":
			return floorDiv(us, 60_000_000) * 60_000_000, nil
		case "SECOND":
			return floorDiv(us, 1_000_000) * 1_000_000, nil
		case "MILLISECOND":
			return floorDiv(us, 1000) * 1000, nil
		case "MICROSECOND":
			return us, nil
		default:
			return nil, nil
		}
		return out.UnixMicro(), nil
	}), nil
}

// patternArg is the optional format literal of to_date, to_timestamp and
// date_format (Spark's datetime pattern).
func patternArg(call Call) (string, bool, error) {
	if len(call.Args) < 2 {
		return "", false, nil
	}
	l, ok := call.Args[1].(Lit)
	if !ok || l.Kind != LitString {
		return "", false, mismatch(call, "the format must be a string literal")
	}
	return l.Str, true, nil
}

func parseFailed(c *ctx, call Call, s, pat string) error {
	if !c.ansi {
		return nil
	}
	return errcode.New("CANNOT_PARSE_TIMESTAMP", "", "use try_to_timestamp, or set spark.sql.ansi.enabled=false to make it NULL",
		"text %q could not be parsed with the pattern %q in %s", s, pat, call)
}

// parseWith parses s with pattern (Spark's letters, a subset).
func parseWith(s, pattern string) (int64, bool) {
	layout, ok := goLayout(pattern)
	if !ok {
		return 0, false
	}
	t, err := time.ParseInLocation(layout, s, time.UTC)
	if err != nil {
		return 0, false
	}
	return t.UnixMicro(), true
}

func toTimestamp(_ *compiler, call Call, args []node) (node, error) {
	pat, has, err := patternArg(call)
	if err != nil {
		return nil, err
	}
	if !has {
		if args[0].typ() == Date || args[0].typ() == Timestamp {
			return to(args[0], Timestamp), nil
		}
		a, err := want(call, args[:1], String)
		if err != nil {
			return nil, err
		}
		return strict(call.Name, Timestamp, a, call, func(c *ctx, v []any) (any, error) {
			us, ok := ParseTimestamp(strings.TrimSpace(v[0].(string)))
			if !ok {
				return nil, parseFailed(c, call, v[0].(string), "")
			}
			return us, nil
		}), nil
	}
	if _, ok := goLayout(pat); !ok {
		return nil, errcode.New(CodeInvalidArgument, "", "use the pattern letters y M d H h m s S a E and quoted text", "unsupported datetime pattern %q in %s", pat, call)
	}
	a, err := want(call, args[:1], String)
	if err != nil {
		return nil, err
	}
	return strict(call.Name, Timestamp, a, call, func(c *ctx, v []any) (any, error) {
		us, ok := parseWith(v[0].(string), pat)
		if !ok {
			return nil, parseFailed(c, call, v[0].(string), pat)
		}
		return us, nil
	}), nil
}

func toDate(c *compiler, call Call, args []node) (node, error) {
	n, err := toTimestamp(c, call, args)
	if err != nil {
		return nil, err
	}
	if _, has, _ := patternArg(call); !has && args[0].typ() == String {
		return strict(call.Name, Date, []node{args[0]}, call, func(c *ctx, v []any) (any, error) {
			d, ok := parseDate(strings.TrimSpace(v[0].(string)))
			if !ok {
				return nil, parseFailed(c, call, v[0].(string), "")
			}
			return d, nil
		}), nil
	}
	return &castNode{x: n, to: Date, src: call, implicit: true}, nil
}

func unixTimestamp(c *compiler, call Call, args []node) (node, error) {
	n := args[0]
	if n.typ() == String {
		var err error
		if n, err = toTimestamp(c, call, args); err != nil {
			return nil, err
		}
	}
	a, err := want(call, []node{n}, Timestamp)
	if err != nil {
		return nil, err
	}
	return strict(call.Name, BigInt, a, call, func(_ *ctx, v []any) (any, error) { return floorDiv(v[0].(int64), 1_000_000), nil }), nil
}

func dateFormat(_ *compiler, call Call, args []node) (node, error) {
	pat, _, err := patternArg(call)
	if err != nil {
		return nil, err
	}
	layout, ok := goLayout(pat)
	if !ok {
		return nil, errcode.New(CodeInvalidArgument, "", "use the pattern letters y M d H h m s S a E and quoted text", "unsupported datetime pattern %q in %s", pat, call)
	}
	a, err := want(call, args[:1], Timestamp)
	if err != nil {
		return nil, err
	}
	return strict(call.Name, String, a, call, func(_ *ctx, v []any) (any, error) {
		return ts(v[0].(int64)).Format(layout), nil
	}), nil
}

// goLayout translates a Spark datetime pattern into a Go time layout: the
// letters y (yyyy, yy), M (M, MM, MMM, MMMM), d, H, h, m, s, S (1 to 6,
// a fraction after a '.'), a, E (EEE, EEEE), and 'quoted' text; false for
// another letter.
func goLayout(p string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(p); {
		ch := p[i]
		j := i
		for j < len(p) && p[j] == ch {
			j++
		}
		n := j - i
		switch ch {
		case '\'':
			k := strings.IndexByte(p[i+1:], '\'')
			if k < 0 {
				return "", false
			}
			b.WriteString(p[i+1 : i+1+k])
			i += k + 2
			continue
		case 'y':
			if n == 2 {
				b.WriteString("06")
			} else {
				b.WriteString("2006")
			}
		case 'M':
			b.WriteString(map[int]string{1: "1", 2: "01", 3: "Jan", 4: "January"}[min(n, 4)])
		case 'd':
			b.WriteString(map[bool]string{true: "2", false: "02"}[n == 1])
		case 'H':
			b.WriteString("15")
		case 'h':
			b.WriteString(map[bool]string{true: "3", false: "03"}[n == 1])
		case 'm':
			b.WriteString(map[bool]string{true: "4", false: "04"}[n == 1])
		case 's':
			b.WriteString(map[bool]string{true: "5", false: "05"}[n == 1])
		case 'S':
			if n > 6 {
				return "", false
			}
			b.WriteString(strings.Repeat("0", n))
		case 'a':
			b.WriteString("PM")
		case 'E':
			b.WriteString(map[bool]string{true: "Monday", false: "Mon"}[n >= 4])
		default:
			if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' {
				return "", false
			}
			b.WriteString(p[i:j])
		}
		i = j
	}
	return b.String(), true
}
