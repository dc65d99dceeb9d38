package interval

import (
	"testing"
	"time"
)

// TestParse covers the spellings of the three callers that each had their
// own parser: window() and withWatermark ('5minutes', 'interval 2 hours'),
// triggers ('500 milliseconds') and Delta's table properties ('interval 1
// week').
func TestParse(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"5 minutes": 5 * time.Minute, "5minutes": 5 * time.Minute, "INTERVAL 2 HOURS": 2 * time.Hour,
		"1 hour 30 minutes": 90 * time.Minute, "60 minutes": time.Hour, "500 milliseconds": 500 * time.Millisecond,
		"interval 1 week": 7 * 24 * time.Hour, "interval 30 days": 30 * 24 * time.Hour, "10 us": 10 * time.Microsecond,
		"1 d": 24 * time.Hour, "0 seconds": 0,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"": "empty", "interval": "empty", "5": "pairs", "1 month": "no fixed length", "2 years": "no fixed length",
		"5 fortnights": "unknown unit", "-1 hour": "whole number", "1.5 hours": "whole number", "99999999 weeks": "too long",
	} {
		_, err := Parse(in)
		e, ok := err.(*Error)
		if !ok || e.Text != in || !contains(e.Why, why) {
			t.Errorf("Parse(%q) = %v, want an *Error saying %q", in, err, why)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestFormatRoundTrip: Format's text parses back to the same duration, and
// equal durations written differently format alike.
func TestFormatRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{time.Microsecond, 5 * time.Minute, 48 * time.Hour, 90 * time.Minute, 36*time.Hour + 1500*time.Millisecond} {
		back, err := Parse(Format(d))
		if err != nil || back != d {
			t.Errorf("%s -> %q -> %s %v", d, Format(d), back, err)
		}
	}
	a, _ := Parse("60 minutes")
	b, _ := Parse("1 hour")
	if Format(a) != Format(b) || Format(a) != "1 hour" {
		t.Errorf("60 minutes formats %q, 1 hour %q", Format(a), Format(b))
	}
}

func FuzzParse(f *testing.F) {
	f.Add("1 hour 30 minutes")
	f.Add("interval 5minutes")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if d < 0 || d > Max {
			t.Fatalf("Parse(%q) = %s, outside [0, Max]", s, d)
		}
		if back, err := Parse(Format(d)); err != nil || back != d {
			t.Fatalf("%q -> %s -> %q -> %s %v", s, d, Format(d), back, err)
		}
	})
}
