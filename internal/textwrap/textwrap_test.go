package textwrap

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestWords(t *testing.T) {
	got := Words("  one two three four", "    ", 11)
	want := "  one two\n    three\n    four\n"
	if got != want {
		t.Fatalf("Words = %q, want %q", got, want)
	}
	// A word longer than the width stands alone on its line, unbroken.
	got = Words("see s3://bucket/a/very/long/key now", "  ", 10)
	want = "see\n  s3://bucket/a/very/long/key\n  now\n"
	if got != want {
		t.Fatalf("Words = %q, want %q", got, want)
	}
}

// TestLinesProperty checks, on generated text, what Lines promises: no
// line over the width unless it is one word after its indent, the words
// in order, and short lines untouched.
func TestLinesProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		var lines []string
		for n := r.IntN(5) + 1; n > 0; n-- {
			var words []string
			for k := r.IntN(30); k > 0; k-- {
				words = append(words, strings.Repeat("x", r.IntN(25)+1))
			}
			lines = append(lines, strings.Repeat(" ", r.IntN(6))+strings.Join(words, " "))
		}
		in := strings.Join(lines, "\n") + "\n"
		width := r.IntN(60) + 20
		out := Lines(in, width)
		if strings.Join(strings.Fields(out), " ") != strings.Join(strings.Fields(in), " ") {
			t.Fatalf("words changed:\n%q\n%q", in, out)
		}
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if len(l) > width && len(strings.Fields(l)) > 1 {
				t.Fatalf("line of %d > %d columns with more than one word: %q", len(l), width, l)
			}
		}
		for _, l := range lines {
			if len(l) <= width && !strings.Contains(out, l+"\n") {
				t.Fatalf("short line %q changed in %q", l, out)
			}
		}
	}
}
