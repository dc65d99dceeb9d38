// Package interval is ethstream's one reader of Spark interval strings: the
// durations of window(), withWatermark, processingTime triggers and Delta's
// delta.*RetentionDuration table properties ("5 minutes", "1 hour 30
// minutes", "interval 2 days", "1 week"). It imports nothing of ethstream,
// so the SQL front end, the pipeline and the Delta sink share it.
//
// The units are Spark's (IntervalUtils.stringToInterval: microsecond,
// millisecond, second, minute, hour, day, week, singular or plural), plus
// the abbreviations ethstream always accepted (us, ms, s, sec, secs, m, min,
// mins, h, d). Months and years are refused: they have no fixed length, and
// Spark refuses them in a window or a watermark too. A unit may follow its
// number without a space ("5minutes"); the word "interval" may lead.
package interval

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Units maps every accepted unit spelling (lowercase) to its length.
var Units = map[string]time.Duration{
	"microsecond": time.Microsecond, "microseconds": time.Microsecond, "us": time.Microsecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond, "ms": time.Millisecond,
	"second": time.Second, "seconds": time.Second, "sec": time.Second, "secs": time.Second, "s": time.Second,
	"minute": time.Minute, "minutes": time.Minute, "min": time.Minute, "mins": time.Minute, "m": time.Minute,
	"hour": time.Hour, "hours": time.Hour, "h": time.Hour,
	"day": 24 * time.Hour, "days": 24 * time.Hour, "d": 24 * time.Hour,
	"week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// Max bounds a parsed interval (a century): longer is a typo, and the bound
// keeps every sum far from time.Duration's overflow.
const Max = 100 * 365 * 24 * time.Hour

// Error is why a text is not an interval; Text is the input.
type Error struct {
	Text, Why string
}

func (e *Error) Error() string { return fmt.Sprintf("interval %q: %s", e.Text, e.Why) }

// Parse reads a non-negative duration in Spark's interval-string form. The
// returned error is an *Error; callers wrap it in their own error code.
func Parse(s string) (time.Duration, error) {
	bad := func(why string) error { return &Error{Text: s, Why: why} }
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
		if i > 0 && i < len(w) && w[i] >= 'a' && w[i] <= 'z' {
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
		d, ok := Units[unit]
		if !ok {
			switch unit {
			case "month", "months", "year", "years":
				return 0, bad(unit + " has no fixed length; use days")
			}
			return 0, bad("unknown unit " + strconv.Quote(unit))
		}
		if n > int64(Max/d) {
			return 0, bad("too long")
		}
		total += time.Duration(n) * d
		if total > Max {
			return 0, bad("too long")
		}
	}
	return total, nil
}

// Format renders d in the form Parse reads, in the largest whole units
// ("5 minutes", "2 days", "1 hour 30 minutes"): equal durations written
// differently ('60 minutes', '1 hour') format alike.
func Format(d time.Duration) string {
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
