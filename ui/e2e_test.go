package ui

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// e2eDays is the archive of the browser test: enough days for a backfill of
// a few batches, small enough for a CI run of seconds.
const e2eDays = 12

// TestDashboardInBrowser runs `ethstream demo --ui-addr` as a user would
// (the real binary, each phase its own process) and drives Debian's chromium
// through playwright-core (ui/e2e/dashboard.mjs): it waits for the shrink
// phase and asserts from the page that batch ids continue, the tombstone of
// s3_backfill is listed, the REPARTITION batch is marked and every chart
// holds one point per batch, then saves dashboard.png and
// dashboard-phone.png into its own directory: the committed ones are the
// reference run's (README.md, "Watch it live"), never a test run's.
//
// It needs /usr/bin/chromium (or $CHROMIUM), node, and `npm ci` run in
// ui/e2e (.ci/run does all three). Without them it is skipped on a
// developer's machine and fails under CI (CI set), so a CI machine that lost
// its browser cannot pass silently.
func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser end-to-end test")
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	var missing []string
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium+" (apt-get install -y chromium)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	e2eDir, _ := filepath.Abs("e2e")
	if _, err := os.Stat(filepath.Join(e2eDir, "node_modules", "playwright-core")); err != nil {
		missing = append(missing, "playwright-core (cd ui/e2e && npm ci)")
	}
	if len(missing) > 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("the browser test cannot run under CI: missing %s", strings.Join(missing, ", "))
		}
		t.Skipf("missing %s", strings.Join(missing, ", "))
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "ethstream")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	build := exec.Command(goTool, "build", "-o", bin, "github.com/ethstream/ethstream/cmd/ethstream")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build ethstream: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	demoCmd := exec.Command(bin, "demo", "--days", strconv.Itoa(e2eDays), "--workdir", filepath.Join(dir, "work"),
		"--results", filepath.Join(dir, "results"), "--ui-addr", "127.0.0.1:0", "--ui-wait")
	demoCmd.Stderr = logWriter(t, filepath.Join(dir, "demo.stderr"))
	demoOut, err := demoCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stopDemo := startGroup(t, demoCmd)
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(demoOut)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var url string
	var out strings.Builder
	for url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo ended before serving the dashboard:\n%s", out.String())
			}
			out.WriteString(l + "\n")
			url, _ = strings.CutPrefix(l, "dashboard: ")
		case <-ctx.Done():
			t.Fatal("no dashboard address printed")
		}
	}
	collected := make(chan string)
	go func() {
		for l := range lines {
			out.WriteString(l + "\n")
		}
		collected <- out.String()
	}()

	// The screenshots go to the test's directory: the committed results/
	// are the reference run's.
	shots := filepath.Join(dir, "shots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	nodeCmd := exec.Command(node, filepath.Join(e2eDir, "dashboard.mjs"), url, shots)
	nodeCmd.Dir = e2eDir
	nodeCmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	var nodeOut strings.Builder
	nodeCmd.Stdout, nodeCmd.Stderr = &nodeOut, &nodeOut
	stopNode := startGroup(t, nodeCmd)
	nodeErr := waitCtx(ctx, nodeCmd, stopNode)
	t.Logf("browser:\n%s", nodeOut.String())
	if nodeErr != nil {
		t.Errorf("browser test: %v", nodeErr)
	}

	// The demo waits (--ui-wait) until interrupted, as a user's Ctrl-C.
	stopDemo(syscall.SIGINT)
	demoErr := waitCtx(ctx, demoCmd, stopDemo)
	text := <-collected
	if demoErr != nil || !strings.Contains(text, "all checks passed") {
		stderr, _ := os.ReadFile(filepath.Join(dir, "demo.stderr"))
		t.Fatalf("demo: %v\n%s\n%s", demoErr, text, stderr)
	}
}

// startGroup starts cmd in its own process group and returns a function that
// signals the whole group (the demo's phases, the browser of node), so that
// nothing the test started outlives it.
func startGroup(t *testing.T, cmd *exec.Cmd) func(syscall.Signal) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	pgid := cmd.Process.Pid
	signal := func(sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }
	t.Cleanup(func() { signal(syscall.SIGKILL) })
	return signal
}

// waitCtx waits for cmd; if ctx ends first, or the process does not exit
// within a minute of its group being interrupted, the group is killed.
func waitCtx(ctx context.Context, cmd *exec.Cmd, signal func(syscall.Signal)) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		signal(syscall.SIGINT)
	}
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		signal(syscall.SIGKILL)
		return <-done
	}
}

func logWriter(t *testing.T, path string) *os.File {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
