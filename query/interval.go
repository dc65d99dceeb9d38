package query

import (
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
)

var intervalUnits = map[string]time.Duration{
	"microsecond": time.Microsecond, "microseconds": time.Microsecond, "us": time.Microsecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond, "ms": time.Millisecond,
	"second": time.Second, "seconds": time.Second, "sec": time.Second, "secs": time.Second, "s": time.Second,
	"minute": time.Minute, "minutes": time.Minute, "min": time.Minute, "mins": time.Minute, "m": time.Minute,
	"hour": time.Hour, "hours": time.Hour, "h": time.Hour,
	"day": 24 * time.Hour, "days": 24 * time.Hour, "d": 24 * time.Hour,
	"week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// ParseInterval reads a duration in Spark's interval-string form, as
// window() and withWatermark take it: "5 minutes", "1 hour 30 minutes",
// "interval 2 days", "48 hours". Months and years are refused (they have no
// fixed length, and Spark refuses them in windows too).
func ParseInterval(s string) (time.Duration, error) {
	bad := func(why string) error {
		return errcode.New(CodeParseSyntax, "", "write a duration such as '5 minutes', '1 hour' or '2 days'",
			"interval %q: %s", s, why)
	}
	f := strings.Fields(strings.ToLower(s))
	if len(f) > 0 && f[0] == "interval" {
		f = f[1:]
	}
	if len(f) == 0 {
		return 0, bad("empty")
	}
	// "5minutes" and "5 minutes" alike.
	var parts []string
	for _, w := range f {
		i := 0
		for i < len(w) && (w[i] >= '0' && w[i] <= '9') {
			i++
		}
		if i > 0 && i < len(w) {
			parts = append(parts, w[:i], w[i:])
		} else {
			parts = append(parts, w)
		}
	}
	if len(parts)%2 != 0 {
		return 0, bad("want <number> <unit> pairs")
	}
	var total time.Duration
	for i := 0; i < len(parts); i += 2 {
		n, err := strconv.ParseInt(parts[i], 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return 0, bad("not a whole number: " + parts[i])
		}
		unit := parts[i+1]
		d, ok := intervalUnits[unit]
		if !ok {
			switch unit {
			case "month", "months", "year", "years":
				return 0, bad(unit + " has no fixed length; use days")
			}
			return 0, bad("unknown unit " + strconv.Quote(unit))
		}
		if n > int64((1<<62)/d) {
			return 0, bad("too long")
		}
		total += time.Duration(n) * d
		if total < 0 || total > 100*365*24*time.Hour {
			return 0, bad("too long")
		}
	}
	return total, nil
}

// FormatInterval renders d in the form ParseInterval reads, in the largest
// whole units ("5 minutes", "48 hours", "1 hour 30 minutes").
func FormatInterval(d time.Duration) string {
	if d == 0 {
		return "0 seconds"
	}
	var parts []string
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}, {time.Millisecond, "millisecond"}, {time.Microsecond, "microsecond"}} {
		if n := d / u.d; n > 0 {
			name := u.name
			if n != 1 {
				name += "s"
			}
			parts = append(parts, strconv.FormatInt(int64(n), 10)+" "+name)
			d -= n * u.d
		}
	}
	return strings.Join(parts, " ")
}
