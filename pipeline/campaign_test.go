package pipeline

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/storage/s3test"
)

// The crash campaign over the fault proxy (issue 28, "Done when"): the
// reference query runs with its checkpoint and table on each S3 server
// (the embedded endpoint, and Versity when .ci/run started it) behind the
// fault proxy, and its archive on the local disk (even seeds) or copied to
// the server and read through the same proxy (odd seeds). A run is a
// series of attempts drawn from the run's seed: a rate of injected faults
// (500, 503, resets, slow answers, bodies cut short, PUTs stored empty or
// half, bodies damaged in transit) and one crash at a request chosen from
// the seed, the crash modes taken in turn: a SIGKILL of the query's own
// process, the store vanishing under an in-process query (every later
// request reset: a partition or a machine that lost its network), or a
// cancel (an operator's stop). Between attempts the local cache is kept or
// thrown away (a restart on another machine). After the last faulty
// attempt a clean start finishes the run.
//
// Every attempt must end in success, a coded error or the crash itself;
// the commit log never shrinks; and the finished run's table equals the
// oracle, a recount of the raw archive blocks, its state equals a local
// run that never faulted, and `checkpoint verify` finds nothing damaged.
//
// The short campaign (CI) is -campaign.n=3 runs per server; the long one,
// e.g. go test ./pipeline/ -run TestCrashCampaign -campaign.n=40
// -campaign.seed=7, prints its size (runs, attempts, kills, faults) with -v.

var (
	campaignN    = flag.Int("campaign.n", 3, "runs of the crash campaign per S3 server")
	campaignSeed = flag.Uint64("campaign.seed", 1, "first seed of the crash campaign (run i uses seed+i)")
)

// The campaign's child process: one attempt of the query, killed by the
// parent at the request its seed chose. It exits 0 when the run finished,
// 4 on a coded error, 5 on an error without a code (a divergence).
const (
	envCampaignChild = "ETHSTREAM_TEST_CAMPAIGN_CHILD"
	campaignLeaseTTL = time.Second
)

func init() {
	if os.Getenv(envCampaignChild) == "" {
		return
	}
	cfg := s3Config(os.Getenv(envChildCkpt), os.Getenv(envChildTable), os.Getenv(envChildLocal), os.Getenv(envChildSrc))
	cfg.Clock = &waitClock{}
	_, err := Run(context.Background(), cfg)
	switch {
	case err == nil:
		os.Exit(0)
	case errcode.Code(err) != "":
		fmt.Fprintf(os.Stderr, "campaign child: %s\n", errcode.Code(err))
		os.Exit(4)
	default:
		fmt.Fprintf(os.Stderr, "campaign child: uncoded error: %v\n", err)
		os.Exit(5)
	}
}

// crashMode is how an attempt ends early.
type crashMode int

const (
	crashNone      crashMode = iota
	crashKill                // SIGKILL of the child process running the query
	crashPartition           // every request from the crash point on is reset (in-process query)
	crashCancel              // the in-process query's context is cancelled
)

func (m crashMode) String() string {
	return [...]string{"none", "sigkill", "partition", "cancel"}[m]
}

// attempt is one start of the query: its faults and its crash point. The
// proxy calls schedule under its own lock; the fields the test reads after
// the attempt are guarded by mu.
type attempt struct {
	rng     *rand.Rand
	rate    float64 // probability that a request is faulted
	mode    crashMode
	crashAt int // request index of the crash
	crash   func()

	mu      sync.Mutex
	crashed bool
	faults  int
}

// campaignFaults are the injected faults; put marks those that only a PUT
// can receive (the proxy passes them on for any other request).
var campaignFaults = []struct {
	f   s3test.Fault
	put bool
}{
	{s3test.Fault{Status: 500, Code: "InternalError"}, false},
	{s3test.Fault{Status: 503, Code: "SlowDown"}, false},
	{s3test.Fault{Reset: true}, false},
	{s3test.Fault{Delay: 30 * time.Millisecond}, false},
	{s3test.Fault{Truncate: true}, false},
	{s3test.Fault{EmptyPut: true}, true},
	{s3test.Fault{Corrupt: true}, true},
}

func (a *attempt) schedule(r s3test.Request) s3test.Fault {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.crashed {
		if a.mode == crashCancel {
			return s3test.Fault{}
		}
		return s3test.Fault{Reset: true} // the process is gone, or its network
	}
	if a.mode != crashNone && r.N >= a.crashAt {
		a.crashed = true
		a.crash()
		if a.mode == crashCancel {
			return s3test.Fault{}
		}
		return s3test.Fault{Reset: true}
	}
	if a.rng.Float64() >= a.rate {
		return s3test.Fault{}
	}
	c := campaignFaults[a.rng.IntN(len(campaignFaults))]
	if c.put && r.Kind != "PUT" {
		return s3test.Fault{}
	}
	a.faults++
	return c.f
}

// campaignTally is the campaign's size, for the report.
type campaignTally struct {
	runs, attempts, kills, partitions, cancels, faults int
	codes                                              map[string]int
}

func (c *campaignTally) String() string {
	return fmt.Sprintf("%d runs, %d attempts, %d SIGKILLs, %d partitions, %d cancels, %d injected faults; attempts ended by code: %v",
		c.runs, c.attempts, c.kills, c.partitions, c.cancels, c.faults, c.codes)
}

func TestCrashCampaign(t *testing.T) {
	want := recount(t, mustArchive(t))
	_, refState := reference(t)
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		uploadArchive(t, s, s, campaignArchive)
		// The requests of a clean run, with the archive on the disk and on
		// the server: where the crash points are drawn from.
		var requests [2]int
		for i, src := range []func(s3test.Server) string{localArchive(t), s3Archive} {
			calib, counts := s.Faulty(t, s3test.Always(s3test.Fault{}))
			prefix := fmt.Sprintf("calib-%d", i)
			cfg := s3Config(calib.Location(prefix+"/checkpoint"), calib.Location(prefix+"/table"), t.TempDir(), src(calib))
			if _, err := Run(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			requests[i] = counts.Total()
		}
		tally := &campaignTally{codes: map[string]int{}}
		for i := range *campaignN {
			seed := *campaignSeed + uint64(i)
			campaignRun(t, s, seed, requests, tally)
			prefix := fmt.Sprintf("camp-%d", seed)
			if d := diffCounts(want, locTableCounts(t, s.Location(prefix+"/table"))); d != "" {
				t.Errorf("seed %d: divergence: table: %s", seed, d)
			}
			if got := stateDump(t, s.Location(prefix+"/checkpoint")); got != refState {
				t.Errorf("seed %d: divergence: state differs from the clean local run's:\n%s\nwant\n%s", seed, got, refState)
			}
			ckpt, table, fs, err := Locations(Config{Checkpoint: s.Location(prefix + "/checkpoint"), Table: s.Location(prefix + "/table")})
			if err != nil {
				t.Fatal(err)
			}
			if vr, err := Verify(context.Background(), fs, ckpt, table); err != nil || vr.Damaged > 0 {
				var b bytes.Buffer
				if vr != nil {
					vr.Print(&b)
				}
				t.Errorf("seed %d: checkpoint verify: %v\n%s", seed, err, b.String())
			}
			tally.runs++
		}
		t.Logf("crash campaign on %s (a clean run: %d requests, %d with the archive on the server): %s", s.Name, requests[0], requests[1], tally)
	})
}

// campaignArchive is the prefix of the archive's copy on each server.
const campaignArchive = "archive"

// localArchive reads the archive from the disk, whatever the server.
func localArchive(t *testing.T) func(s3test.Server) string {
	uri := archiveURI(t)
	return func(s3test.Server) string { return uri }
}

// s3Archive reads the archive's copy on srv (the server, or the fault
// proxy in front of it, whose faults then reach the archive's reads too).
func s3Archive(srv s3test.Server) string {
	return srv.Location(campaignArchive+"/v1.0/eth/blocks") + "&maxFilesPerTrigger=1"
}

// campaignRun runs one seed's attempts on fresh prefixes of s, then the
// clean start that finishes it. Odd seeds read the archive's copy on the
// server through the attempt's fault proxy, even ones the local disk.
func campaignRun(t *testing.T, s s3test.Server, seed uint64, requests [2]int, tally *campaignTally) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0xc4a5))
	onServer := int(seed % 2)
	source := []func(s3test.Server) string{localArchive(t), s3Archive}[onServer]
	prefix := fmt.Sprintf("camp-%d", seed)
	local := t.TempDir()
	commits := 0
	attempts := 2 + rng.IntN(4)
	for n := 0; ; n++ {
		a := &attempt{rng: rand.New(rand.NewPCG(seed, uint64(n)))}
		final := n >= attempts
		if !final {
			a.rate = rng.Float64() * 0.06
			// The modes in turn (from a seeded start), so that even the
			// short campaign has each; where each crash falls is random.
			a.mode = crashMode((int(seed) + n) % 4)
			a.crashAt = rng.IntN(requests[onServer] + requests[onServer]/4)
		}
		if rng.IntN(3) == 0 {
			local = t.TempDir() // a restart on another machine
		}
		faulty, _ := s.Faulty(t, a.schedule)
		ckpt := faulty.Location(prefix+"/checkpoint") + "&leaseTTL=" + campaignLeaseTTL.String()
		table := faulty.Location(prefix + "/table")
		code, err := campaignAttempt(t, a, ckpt, table, local, source(faulty))
		tally.attempts++
		tally.faults += a.faults
		switch {
		case a.crashed && a.mode == crashKill:
			tally.kills++
		case a.crashed && a.mode == crashPartition:
			tally.partitions++
		case a.crashed && a.mode == crashCancel:
			tally.cancels++
		}
		if code != "" {
			tally.codes[code]++
		}
		if err != nil {
			t.Errorf("seed %d attempt %d (%s at request %d, %d faults): divergence: %v", seed, n, a.mode, a.crashAt, a.faults, err)
			return
		}
		now := len(s.Keys(t, prefix+"/checkpoint/commits/"))
		if now < commits {
			t.Errorf("seed %d attempt %d: divergence: the commit log shrank from %d to %d entries", seed, n, commits, now)
			return
		}
		commits = now
		if final && code == "" {
			return
		}
		if final && n > attempts+3 {
			t.Errorf("seed %d: the clean start still fails after %d tries: %s", seed, n-attempts+1, code)
			return
		}
		if a.crashed || code == errcode.CheckpointLocked || code == errcode.StorageUnavailable {
			// A crashed writer's lease (or one whose release the faults
			// swallowed) expires by itself.
			time.Sleep(campaignLeaseTTL + 100*time.Millisecond)
		}
	}
}

// campaignAttempt runs one attempt, in a child process when it is to be
// killed, in process otherwise. It returns the error code the attempt
// ended with ("" for a finished run or a crash), and an error for an
// outcome that is a divergence: an error without a code.
func campaignAttempt(t *testing.T, a *attempt, ckpt, table, local, src string) (string, error) {
	if a.mode == crashKill {
		return campaignChild(t, a, ckpt, table, local, src)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if a.mode == crashCancel {
		a.crash = cancel
	} else {
		a.crash = func() {}
	}
	cfg := s3Config(ckpt, table, local, src)
	cfg.Clock = &waitClock{}
	_, err := Run(ctx, cfg)
	a.mu.Lock()
	cancelled := a.crashed && a.mode == crashCancel
	a.mu.Unlock()
	switch {
	case err == nil:
		return "", nil
	case errcode.Code(err) != "":
		return errcode.Code(err), nil
	case cancelled && errors.Is(err, context.Canceled):
		return "", nil
	}
	return "", fmt.Errorf("an error without a code: %w", err)
}

func campaignChild(t *testing.T, a *attempt, ckpt, table, local, src string) (string, error) {
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envCampaignChild+"=1", envChildCkpt+"="+ckpt, envChildTable+"="+table,
		envChildLocal+"="+local, envChildSrc+"="+src)
	var stderr bytes.Buffer
	child.Stderr = &stderr
	// The child can send its first request before Start returns (a loaded
	// machine deschedules the parent after the fork): a crash drawn then is
	// held until the child's Process is known (schedule calls crash with
	// a.mu held, so started and pending need no other lock).
	started, pending := false, false
	a.mu.Lock()
	a.crash = func() {
		if started {
			_ = child.Process.Kill()
		} else {
			pending = true
		}
	}
	a.mu.Unlock()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	if started = true; pending {
		_ = child.Process.Kill()
	}
	a.mu.Unlock()
	timer := time.AfterFunc(2*time.Minute, func() { _ = child.Process.Kill() })
	err := child.Wait()
	timer.Stop()
	a.mu.Lock()
	killed := a.crashed
	a.mu.Unlock()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return "", nil
	case killed:
		return "", nil
	case errors.As(err, &exit) && exit.ExitCode() == 4:
		_, code, _ := strings.Cut(stderr.String(), "campaign child: ")
		return strings.TrimSpace(code), nil
	}
	return "", fmt.Errorf("child process: %v; stderr:\n%s", err, stderr.String())
}
