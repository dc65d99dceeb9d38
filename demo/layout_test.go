package demo

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCommandLinesRunAsPrinted: the wrapped command is the same argument
// list when a shell reads it back, and no line passes the width but one
// holding a single unbreakable unit.
func TestCommandLinesRunAsPrinted(t *testing.T) {
	args := []string{"run", "--checkpoint", "/tmp/w/checkpoint", "--table", "/tmp/w/table", "--local-dir", "/tmp/w/state-cache",
		"--source", "s3_backfill=s3archive:s3://aws-public-blockchain/v1.0/eth/blocks?endpoint=http://127.0.0.1:34115&region=us-east-2&anonymous=true&maxFilesPerTrigger=5",
		"--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true", "--trigger", "processing-time=50ms",
		"--query", "SELECT count(*) AS n FROM s WHERE miner = 'it''s'", "--max-batches", "16", "--in-memory"}
	out := commandLines("    ethstream", args, 100)
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if len(l) > 100 && len(strings.Fields(strings.TrimSuffix(l, " \\"))) > 2 {
			t.Errorf("a wrappable line of %d columns: %q", len(l), l)
		}
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	got, err := exec.Command("bash", "-c", "f() { shift; printf '%s\\n' \"$@\"; }; f "+strings.TrimPrefix(out, "    ")).Output()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	if want := strings.Join(args, "\n") + "\n"; string(got) != want {
		t.Fatalf("the shell reads back\n%s\nwant\n%s\nfrom\n%s", got, want, out)
	}
}

// TestCheckLineWraps: a check keeps to the width, its result first, both
// figures when it fails.
func TestCheckLineWraps(t *testing.T) {
	c := Check{Name: "6. archive keys in state after retirement = archive rows with open windows in the table (at the next batch's watermark)", Expected: "3133", Actual: "3132"}
	out := checkLine(c, 100)
	if !strings.HasPrefix(out, "FAIL    6. archive keys") || !strings.Contains(out, "expected 3133, actual 3132") {
		t.Fatalf("%q", out)
	}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if len(l) > 100 {
			t.Errorf("line of %d columns: %q", len(l), l)
		}
	}
	if got := checkLine(Check{Name: "1. one query id", Expected: "1", Actual: "1", Pass: true}, 100); got != "PASS    1. one query id: 1\n" {
		t.Errorf("%q", got)
	}
}
