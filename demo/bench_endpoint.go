package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/ethstream/ethstream/internal/cputime"
)

// endpointProcess is an S3 endpoint serving the archive from a process of
// its own (BenchOptions.ServeS3), with one P (GOMAXPROCS=1), so that the S3
// backfill's CPU is the engine's alone, as it is against S3, and the
// endpoint's is measured apart (from /proc/PID/stat).
type endpointProcess struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed when the process has exited
	err  error         // Wait's, once done
}

// endpointStartTimeout bounds the wait for the endpoint's "serving" line.
const endpointStartTimeout = 30 * time.Second

// startEndpoint runs command with --root root on a free loopback port and
// waits for the URL it prints ("serving ROOT at URL ...").
func startEndpoint(ctx context.Context, command []string, root string) (*endpointProcess, error) {
	args := append(slices.Clone(command[1:]), "--root", root, "--addr", "127.0.0.1:0")
	cmd := exec.Command(command[0], args...)
	// One P: the endpoint stands for a server on machines of its own, and
	// with the Go runtime's default of one P per core, its idle Ps spin
	// for work at every request's wake-up on the two cores the engine runs
	// on. A/B/A/B, bench --rounds 3 each: S3 / file:// 1.19x and 1.17x wall
	// (1.15x, 1.14x CPU) with the default, 1.09x and 1.09x (1.06x, 1.06x)
	// with one P, the endpoint's own CPU 1.9-2.0 -> 1.6-1.9 s.
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the S3 endpoint %s: %w", strings.Join(command, " "), err)
	}
	e := &endpointProcess{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			if u, ok := servingURL(sc.Text()); !found && ok {
				found = true
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(urls)
	}()
	go func() {
		e.err = cmd.Wait()
		close(e.done)
	}()
	t := time.NewTimer(endpointStartTimeout)
	defer t.Stop()
	select {
	case u, ok := <-urls:
		if ok {
			e.url = u
			return e, nil
		}
		<-e.done
		return nil, fmt.Errorf("the S3 endpoint %s exited without serving: %v\n%s", strings.Join(command, " "), e.err, stderr.String())
	case <-t.C:
	case <-ctx.Done():
	}
	e.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("the S3 endpoint %s printed no address within %s\n%s", strings.Join(command, " "), endpointStartTimeout, stderr.String())
}

// servingURL returns the URL of serve-s3's "serving ROOT at URL (...)" line.
// ROOT may hold spaces (a work directory's path), the URL does not.
func servingURL(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "serving ")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rest, " at http://")
	if i < 0 {
		return "", false
	}
	u, _, _ := strings.Cut(rest[i+len(" at "):], " ")
	return u, true
}

// cpu returns the endpoint's user+system CPU time so far.
func (e *endpointProcess) cpu() (time.Duration, error) {
	d, err := cputime.Of(e.cmd.Process.Pid)
	if err != nil {
		return 0, fmt.Errorf("the S3 endpoint's CPU time: %w", err)
	}
	return d, nil
}

// stop interrupts the endpoint (serve-s3 stops on SIGINT) and kills it if it
// has not exited within a few seconds.
func (e *endpointProcess) stop() {
	_ = e.cmd.Process.Signal(os.Interrupt)
	select {
	case <-e.done:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
}
