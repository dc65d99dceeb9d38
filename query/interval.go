package query

import (
	"errors"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/interval"
)

// ParseInterval reads a duration in Spark's interval-string form, as
// window() and withWatermark take it (package interval): "5 minutes",
// "1 hour 30 minutes", "interval 2 days", "48 hours". Months and years are
// refused (they have no fixed length, and Spark refuses them in windows too).
func ParseInterval(s string) (time.Duration, error) {
	d, err := interval.Parse(s)
	if err != nil {
		why := err.Error()
		var ie *interval.Error
		if errors.As(err, &ie) {
			why = ie.Why
		}
		return 0, errcode.New(CodeParseSyntax, "", "write a duration such as '5 minutes', '1 hour' or '2 days'",
			"interval %q: %s", s, why)
	}
	return d, nil
}

// FormatInterval renders d in the form ParseInterval reads, in the largest
// whole units ("5 minutes", "2 days", "1 hour 30 minutes").
func FormatInterval(d time.Duration) string { return interval.Format(d) }
