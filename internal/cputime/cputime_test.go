package cputime

import (
	"os"
	"testing"
	"time"
)

// TestParseStat reads utime+stime (ticks of 1/100 s) past a command name
// that holds spaces and parentheses, and refuses a line without them.
func TestParseStat(t *testing.T) {
	stat := "4242 (serve (s3) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 123456 1000000 2000 18446744073709551615"
	got, err := parseStat(stat)
	if err != nil || got != 3250*time.Millisecond {
		t.Fatalf("parseStat = %v, %v; want 3.25s", got, err)
	}
	for _, bad := range []string{"", "4242 serve S 1", "4242 (x) S 1 2 3"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}

// TestOfSelfAgreesWithSelf: this process's CPU time read from /proc and
// from getrusage agree to the /proc tick (10 ms), after some work.
func TestOfSelfAgreesWithSelf(t *testing.T) {
	x := 0
	for start := Self(); Self()-start < 50*time.Millisecond; {
		x++
	}
	before := Self()
	viaProc, err := Of(os.Getpid())
	after := Self()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if viaProc < before-20*time.Millisecond || viaProc > after+20*time.Millisecond {
		t.Fatalf("/proc says %v, getrusage %v..%v (x=%d)", viaProc, before, after, x)
	}
}
