package demo

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ethstream/ethstream/chain/archivegen"
)

// processesOf lists the pids of running processes whose executable is bin.
func processesOf(bin string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if argv0, _, _ := strings.Cut(string(b), "\x00"); argv0 == bin {
			pids = append(pids, pid)
		}
	}
	return pids
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	// A port below the kernel's ephemeral range (32768-60999 by default):
	// the server binds it only after this check, and an ephemeral port
	// could meanwhile become the local port of any outgoing connection of
	// the parallel test packages (the transcript's serve-s3 once failed so,
	// under a CI stress loop, and every request got "connection refused").
	for range 200 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

// buildBinary builds ethstream into dir for a test that runs it as a user
// does, and returns the repository root and the binary.
func buildBinary(t *testing.T, dir string) (root, bin string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "ethstream")
	build := exec.Command("go", "build", "-o", bin, "./cmd/ethstream")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return root, bin
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
	work := t.TempDir()
	root, bin := buildBinary(t, filepath.Join(work, "bin"))
	s3Addr, nodeAddr := freeAddr(t), freeAddr(t)
	env := append(os.Environ(), "WORK="+work, "ETHSTREAM_BIN="+bin, "DAYS=3",
		"S3_ADDR="+s3Addr, "NODE_ADDR="+nodeAddr, "OUT="+filepath.Join(work, "results"))
	var scriptCommands [][]string
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
	t.Cleanup(func() {
		// Whatever happened, nothing the scripts started may outlive the test.
		out := run("stop.sh")
		if pids := processesOf(bin); len(pids) > 0 {
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			t.Errorf("stop.sh left %v running:\n%s", pids, out)
		}
	})

	run("01_generate.sh")
	out := run("02_backfill.sh")
	for _, want := range []string{"$ " + bin + " run", "$ " + bin + " serve-s3", "$ " + bin + " node"} {
		if !strings.Contains(out, want) {
			t.Errorf("02 does not print %q:\n%s", want, out)
		}
	}
	if pids := processesOf(bin); len(pids) != 2 {
		t.Errorf("after 02, %d processes of the binary run, want the two servers: %v", len(pids), pids)
	}
	scriptCommands = append(scriptCommands, commands(out)...)
	// A printed command pastes as is: the source URI's & and ? are quoted.
	if !regexp.MustCompile(`--source 's3_backfill=s3archive:s3://[^' ]*&[^' ]*'`).MatchString(out) {
		t.Errorf("02 prints the source URI unquoted:\n%s", out)
	}
	out = run("03_add_live.sh")
	if !strings.Contains(out, "reusing serve-s3") {
		t.Errorf("03 did not reuse the servers 02 started:\n%s", out)
	}
	scriptCommands = append(scriptCommands, commands(out)...)
	out = run("04_retire_archive.sh")
	scriptCommands = append(scriptCommands, commands(out)...)
	if !strings.Contains(out, "TOMBSTONE_SOURCE_NAME_REUSE") {
		t.Errorf("04 does not show the refused reuse:\n%s", out)
	}
	out = run("05_shrink_state.sh")
	scriptCommands = append(scriptCommands, commands(out)...)
	if !strings.Contains(out, "REPARTITION 200 -> 8") {
		t.Errorf("05 does not show the repartition in inspect:\n%s", out)
	}
	run("06_report.sh")

	// stop.sh stops the servers and says so only once they are gone.
	out = run("stop.sh")
	if !regexp.MustCompile(`stopped serve-s3 \(pid \d+\)`).MatchString(out) || !regexp.MustCompile(`stopped node \(pid \d+\)`).MatchString(out) {
		t.Errorf("stop.sh output:\n%s", out)
	}
	if pids := processesOf(bin); len(pids) > 0 {
		t.Errorf("stop.sh said stopped but %v still run", pids)
	}
	if out := run("stop.sh"); strings.Contains(out, "stopped") {
		t.Errorf("a second stop.sh claims to stop something:\n%s", out)
	}

	// A port held by a process the scripts did not start is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "03_add_live.sh"))
	cmd.Env = append(env, "S3_ADDR="+ln.Addr().String())
	refused, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(refused), "error: PORT_IN_USE: "+ln.Addr().String()) {
		t.Errorf("a foreign listener on S3_ADDR was not refused (err %v):\n%s", err, refused)
	}
	if pids := processesOf(bin); len(pids) > 0 {
		t.Errorf("the refused script left %v running", pids)
	}
	m, err := archivegen.ReadManifest(filepath.Join(work, "s3", Bucket))
	if err != nil {
		t.Fatal(err)
	}
	checkREADMECommands(t, filepath.Join(root, "README.md"), scriptCommands, work, bin,
		[]string{"LAST_BLOCK=" + strconv.FormatUint(m.LastBlock, 10), "LAST_HASH=" + m.LastHash, "HEAD=" + strconv.FormatUint(m.LastBlock+1000, 10)},
		map[string]string{s3Addr: "127.0.0.1:9000", nodeAddr: "127.0.0.1:8545"})

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
