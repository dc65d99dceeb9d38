package demo

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestPhaseScripts runs scripts/01..06 in sequence, as a reader following the
// seeds step by step would, against a temp work dir and a 3-day archive.
func TestPhaseScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the phase scripts")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	bin := filepath.Join(work, "bin", "ethstream")
	build := exec.Command("go", "build", "-o", bin, "./cmd/ethstream")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := append(os.Environ(), "WORK="+work, "ETHSTREAM_BIN="+bin, "DAYS=3",
		"S3_ADDR="+freeAddr(t), "NODE_ADDR="+freeAddr(t), "OUT="+filepath.Join(work, "results"))
	run := func(script string) string {
		t.Helper()
		cmd := exec.Command("bash", filepath.Join(root, "scripts", script))
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out.String())
		}
		return out.String()
	}
	t.Cleanup(func() { run("stop.sh") })

	run("01_generate.sh")
	out := run("02_backfill.sh")
	if !strings.Contains(out, "$ "+bin+" run") {
		t.Errorf("02 does not print the command it runs:\n%s", out)
	}
	run("03_add_live.sh")
	out = run("04_retire_archive.sh")
	if !strings.Contains(out, "TOMBSTONE_SOURCE_NAME_REUSE") {
		t.Errorf("04 does not show the refused reuse:\n%s", out)
	}
	out = run("05_shrink_state.sh")
	if !strings.Contains(out, "REPARTITION 200 -> 8") {
		t.Errorf("05 does not show the repartition in inspect:\n%s", out)
	}
	run("06_report.sh")

	batches, err := ReadBatches(filepath.Join(work, "results", "batches.csv"))
	if err != nil {
		t.Fatal(err)
	}
	phases := map[string]int{}
	for i, b := range batches {
		if b.BatchID != int64(i) {
			t.Fatalf("batch ids not contiguous: row %d has batch %d", i, b.BatchID)
		}
		phases[b.Phase]++
	}
	// 3 files with maxFilesPerTrigger 5: one data batch plus the final no-data
	// batch; then 16, 8 and 1+8 (the control batch) live batches.
	want := map[string]int{"backfill": 2, "add_live": 16, "retire_archive": 8, "shrink_state": 9}
	if fmt.Sprint(phases) != fmt.Sprint(want) {
		t.Fatalf("batches per phase = %v, want %v", phases, want)
	}
}
