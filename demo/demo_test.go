package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
)

// TestDemoReducedScale runs the whole lifecycle on three days of archive and
// asserts every verification line (docs/contracts.md, Demo checks), in process.
func TestDemoReducedScale(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end demo")
	}
	dir := t.TempDir()
	var out strings.Builder
	rep, err := Run(context.Background(), Options{
		WorkDir:    filepath.Join(dir, "work"),
		ResultsDir: filepath.Join(dir, "results"),
		Preset:     chain.LastDaysPreset(3),
		Out:        &out,
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, c := range rep.Checks {
		if !c.Figure && !c.Pass {
			t.Errorf("check failed: %s: expected %s, got %s", c.Name, c.Expected, c.Actual)
		}
	}
	if !rep.Passed() {
		t.Fatalf("demo did not pass:\n%s", out.String())
	}
	// Every check family of docs/contracts.md, Demo checks is present.
	for _, prefix := range []string{"1.", "2.", "3.", "4.", "5.", "6.", "7.", "8.", "9.", "10.", "11."} {
		found := false
		for _, c := range rep.Checks {
			found = found || strings.HasPrefix(c.Name, prefix)
		}
		if !found {
			t.Errorf("no check %s", prefix)
		}
	}
	for _, f := range []string{"batches.csv", "sources.csv", "verification.csv", "summary.txt", "state.svg", "memory.svg", "latency.svg", "input.svg"} {
		if st, err := os.Stat(filepath.Join(dir, "results", f)); err != nil || st.Size() == 0 {
			t.Errorf("results/%s missing or empty: %v", f, err)
		}
	}
	for _, f := range []string{"reorgs.csv", "batches.csv", "sources.csv"} {
		if st, err := os.Stat(filepath.Join(dir, "results", "reorgs", f)); err != nil || st.Size() == 0 {
			t.Errorf("results/reorgs/%s missing or empty: %v", f, err)
		}
	}
	for _, f := range []string{"batches.csv", "sources.csv", "verification.csv"} {
		if st, err := os.Stat(filepath.Join(dir, "results", "seam", f)); err != nil || st.Size() == 0 {
			t.Errorf("results/seam/%s missing or empty: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "TOMBSTONE_SOURCE_NAME_REUSE") {
		t.Errorf("summary does not show the refused reuse:\n%s", out.String())
	}
}

// TreeHash is the evidence for "byte-identical": it must see any change.
func TestTreeHashDetectsChange(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	h1, err := TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	h2, _ := TreeHash(dir)
	if h1 == h2 {
		t.Fatal("content change not detected")
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h3, _ := TreeHash(dir)
	if h3 == h2 {
		t.Fatal("new empty file not detected")
	}
}

// TestDemoOnS3 runs the lifecycle with the checkpoint and the table in the
// embedded S3 endpoint (demo --storage s3): every check passes, and the
// files are the endpoint's objects, not a local directory.
func TestDemoOnS3(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end demo")
	}
	dir := t.TempDir()
	var out strings.Builder
	rep, err := Run(context.Background(), Options{
		WorkDir:    filepath.Join(dir, "work"),
		ResultsDir: filepath.Join(dir, "results"),
		Preset:     chain.LastDaysPreset(2),
		Storage:    "s3",
		Out:        &out,
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, c := range rep.Checks {
		if !c.Figure && !c.Pass {
			t.Errorf("check failed: %s: expected %s, got %s", c.Name, c.Expected, c.Actual)
		}
	}
	if !rep.Passed() {
		t.Fatalf("demo did not pass:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "--checkpoint 's3://"+LakeBucket+"/q1/checkpoint?") {
		t.Errorf("the phases were not given s3:// locations:\n%s", out.String())
	}
	lake := filepath.Join(dir, "work", "s3", LakeBucket, "q1")
	for _, p := range []string{"checkpoint/commits/0", "checkpoint/metadata", "table/_delta_log/00000000000000000000.json"} {
		if _, err := os.Stat(filepath.Join(lake, p)); err != nil {
			t.Errorf("object %s missing: %v", p, err)
		}
	}
	for _, p := range []string{"checkpoint", "table"} {
		if _, err := os.Stat(filepath.Join(dir, "work", p)); !os.IsNotExist(err) {
			t.Errorf("a local %s exists: %v", p, err)
		}
	}
}
