package demo

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The README transcript: every runnable block of the README runs as
// written, in one bash in a fresh directory: the lifecycle (its set-up
// block and phases 1-6), the overlapping seam, the dashboard command, the
// query section with the moved archive, the checkpoint copy, the
// transaction tables with their lifecycle (demo --scenario transactions),
// the logs' topics and the join of blocks with their transactions;
// every output block shown below a
// command is compared with what the program prints. The README is the
// script; nothing here restates it. Each section after the lifecycle works
// in a directory of its own, so they run in any order once the lifecycle
// has. What the transcript cannot run offline or in bounded time is left
// out: the demo itself (run by TestDemo and the README's first command), the
// commands against the real bucket and endpoint, on AWS S3, and the
// real-time and freshness runs (an unbounded query, a 17-minute bench).
//
// How a block is read:
//   - a ```sh block: each command (continuation lines joined) runs in turn
//     in the same shell, so variables carry over as in a reader's terminal.
//     Every command must succeed, except those of a block whose output
//     block is an error (below): they must fail.
//   - an output block whose first line is "$ CMD": CMD runs after the sh
//     block above it, and its output must match the rest of the block.
//   - any other output block is the whole output of the last command of
//     the sh block above it; the command must fail if, and only if, the
//     block shows an "error: " line.
//
// A command's output is what it printed on stdout and stderr, without its
// log lines ("time=hh:mm:ss ..."): they carry times, and the README shows
// them where it explains them.
//
// A block between "<!-- RESULTS-X -->" markers is the reference run's
// (rendered from results/ and compared by TestREADMEResults), not a
// command's output: the transcript skips it.
//
// Placeholders, the only liberties taken: the servers' ports (127.0.0.1:9000,
// :8545, :8546 and :4040 in the text) are replaced by free ones so the test can run
// beside anything; "batchTimestampMs" is a wall-clock time; "..." and "…"
// in an output block stand for any text. Every id, block number, hash and
// watermark is compared as printed: the demo preset is seeded, so they are
// the same on every machine.

// transcriptStep is one command of the transcript and how to judge it.
type transcriptStep struct {
	cmd   string
	fail  bool   // the command must fail (a refusal the README shows)
	want  string // the expected output (an output block), or ""
	where string // where in the README, for messages
}

// transcriptSteps reads the lifecycle section of a README into steps.
func transcriptSteps(doc string) ([]transcriptStep, error) {
	var steps []transcriptStep
	for _, sec := range transcriptSections {
		i := strings.Index(doc, sec.from)
		j := strings.Index(doc, sec.to)
		if i < 0 || j < i {
			return nil, fmt.Errorf("README has no section from %q to %q", sec.from, sec.to)
		}
		var err error
		if steps, err = appendSteps(steps, doc[i:j], sec.first); err != nil {
			return nil, err
		}
	}
	return steps, nil
}

// transcriptSections are the parts of the README the transcript runs, in
// order, in one shell: the lifecycle, the dashboard on its checkpoint, the
// overlapping seam (a copy of its archive extended by the node's blocks),
// the query section (on the lifecycle's archive), the copy of its
// checkpoint, the transaction tables (an archive of their own, and their
// lifecycle), the logs' topics and the join (up to "## Commands").
var transcriptSections = []struct{ from, to, first string }{
	{"## The lifecycle, phase by phase", "## The proof", "set-up"},
	{"## A seam that overlaps on purpose", "## Watch it live", "a seam that overlaps on purpose"},
	{"## Watch it live", "## Rules to carry", "watch it live"},
	{"## Your own query, and what survives a restart", "## Against the real bucket", "your own query"},
	{"## Moving a query", "## The chain's other tables", "moving a query"},
	{"## The chain's other tables", "## Commands", "the chain's other tables"},
	{"## The orders example", "## Performance", "the orders example"},
}

// appendSteps reads one section's blocks into steps.
func appendSteps(steps []transcriptStep, section, heading string) ([]transcriptStep, error) {
	lines := strings.Split(section, "\n")
	lastSh := -1 // index in steps of the last command of the last sh block
	for k := 0; k < len(lines); k++ {
		l := lines[k]
		if strings.HasPrefix(l, "### ") {
			heading = strings.TrimPrefix(l, "### ")
		}
		if strings.HasPrefix(l, "<!-- RESULTS-") {
			for k++; k < len(lines) && !strings.HasPrefix(lines[k], "<!-- /RESULTS-"); k++ {
			}
			continue
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		lang := strings.TrimPrefix(l, "```")
		var body []string
		for k++; k < len(lines) && !strings.HasPrefix(lines[k], "```"); k++ {
			body = append(body, lines[k])
		}
		text := strings.Join(body, "\n")
		switch {
		case lang == "sh":
			for _, c := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
				if c = strings.TrimSpace(c); strings.Contains(c, "& ") && strings.Contains(c, "#") {
					// A server line's comment would swallow the
					// transcript's redirection.
					return nil, fmt.Errorf("%s: `%s`: a server started with & takes no comment", heading, c)
				}
				if c != "" && !strings.HasPrefix(c, "#") {
					steps = append(steps, transcriptStep{cmd: c, where: heading})
				}
			}
			lastSh = len(steps) - 1
		case lang == "" && strings.HasPrefix(text, "$ "):
			first, rest, _ := strings.Cut(text, "\n")
			steps = append(steps, transcriptStep{cmd: strings.TrimPrefix(first, "$ "), want: rest, where: heading})
		case lang == "":
			if lastSh < 0 || lastSh != len(steps)-1 || steps[lastSh].want != "" {
				return nil, fmt.Errorf("%s: an output block without \"$ CMD\" must follow a sh block (it is its last command's output):\n%s", heading, text)
			}
			steps[lastSh].want = text
			steps[lastSh].fail = strings.HasPrefix(text, "error: ") || strings.Contains(text, "\nerror: ")
		default:
			return nil, fmt.Errorf("%s: a ```%s block in the lifecycle: the transcript cannot run it", heading, lang)
		}
	}
	return steps, nil
}

// addrFlag finds a server command's --addr (or --ui-addr) HOST:PORT.
var addrFlag = regexp.MustCompile(`-addr (127\.0\.0\.1):(\d+)`)

// transcriptScript renders the steps as one bash script: each step's
// output and status land in dir/N.out and dir/N.rc; the first unexpected
// status stops the script.
func transcriptScript(steps []transcriptStep, dir string, ports map[string]string) string {
	var b strings.Builder
	// As a reader's interactive shell: no pipefail, so `... | head` is fine.
	b.WriteString("set -u\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n")
	for n, s := range steps {
		cmd := s.cmd
		for from, to := range ports {
			cmd = strings.ReplaceAll(cmd, from, to)
		}
		out := filepath.Join(dir, strconv.Itoa(n))
		if strings.HasSuffix(cmd, "&") {
			// A server: started in the background as the reader does; its
			// output goes to its own file, its status is not waited for.
			// Like a reader, the script goes on once the server answers
			// (at most 30 s): a loaded machine can take longer to start
			// it than the next command's retries last.
			fmt.Fprintf(&b, "%s >%s.out 2>&1 &\necho 0 >%s.rc\n", strings.TrimSuffix(cmd, "&"), out, out)
			if m := addrFlag.FindStringSubmatch(cmd); m != nil {
				fmt.Fprintf(&b, "for _ in $(seq 600); do (exec 3<>/dev/tcp/%s/%s) 2>/dev/null && break; sleep 0.05; done\n", m[1], m[2])
			}
			continue
		}
		fmt.Fprintf(&b, "t0=$EPOCHREALTIME\n%s >%s.out 2>&1\nrc=$?; echo $rc >%s.rc; echo $t0 $EPOCHREALTIME >%s.time\n", cmd, out, out, out)
		if s.fail {
			fmt.Fprintf(&b, "[ $rc -ne 0 ] || exit 1\n")
		} else {
			fmt.Fprintf(&b, "[ $rc -eq 0 ] || exit 1\n")
		}
	}
	return b.String()
}

// transcriptPattern turns an output block into an anchored regexp: "..."
// and "…" match any text, a batchTimestampMs any time.
func transcriptPattern(want string) *regexp.Regexp {
	var re strings.Builder
	re.WriteString(`(?s)^`)
	rest := strings.ReplaceAll(want, "…", "...")
	for {
		i := strings.Index(rest, "...")
		if i < 0 {
			re.WriteString(regexp.QuoteMeta(rest))
			break
		}
		re.WriteString(regexp.QuoteMeta(rest[:i]) + `.*?`)
		rest = rest[i+3:]
	}
	re.WriteString(`\n?$`)
	return regexp.MustCompile(batchTimestamp.ReplaceAllLiteralString(re.String(), `"batchTimestampMs":\d+`))
}

// logLine is a log line in a command's output.
var logLine = regexp.MustCompile(`(?m)^time=\d\d:\d\d:\d\d .*\n`)

// batchTimestamp is a wall-clock time in an offsets entry.
var batchTimestamp = regexp.MustCompile(`"batchTimestampMs":\d+`)

func TestTranscriptSteps(t *testing.T) {
	doc := "## The lifecycle, phase by phase\n```sh\nA=1\nethstream run \\\n  --x &\n```\n" +
		"### 1. one\n```sh\nethstream run --bad\n```\n```\nerror: X: y. To fix: z\n```\n" +
		"```\n$ cat f\nline ... end\n```\n### 6. six\n```sh\nS=6\n```\n<!-- RESULTS-X -->\n```\nthe reference run's\n```\n<!-- /RESULTS-X -->\n" +
		"## The proof\n```sh\nnot run\n```\n## A seam that overlaps on purpose\n```sh\nV=1\n```\n## Watch it live\n```sh\nU=1\n```\n## Rules to carry\n"
	doc += "## Your own query, and what survives a restart\n```sh\nQ=1\nethstream run --q\n```\n```\nquery … run …\n```\n## Against the real bucket\n```sh\nnot run\n```\n" +
		"## Moving a query\n```sh\nC=1\n```\n## The chain's other tables\n```sh\nT=1\n```\n## Commands\n## The orders example\n```sh\nO=1\n```\n## Performance\n"
	steps, err := transcriptSteps(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", steps)
	want := "[{cmd:A=1 fail:false want: where:set-up} {cmd:ethstream run    --x & fail:false want: where:set-up} " +
		"{cmd:ethstream run --bad fail:true want:error: X: y. To fix: z where:1. one} {cmd:cat f fail:false want:line ... end where:1. one} " +
		"{cmd:S=6 fail:false want: where:6. six} {cmd:V=1 fail:false want: where:a seam that overlaps on purpose} {cmd:U=1 fail:false want: where:watch it live} " +
		"{cmd:Q=1 fail:false want: where:your own query} {cmd:ethstream run --q fail:false want:query … run … where:your own query} " +
		"{cmd:C=1 fail:false want: where:moving a query} {cmd:T=1 fail:false want: where:the chain's other tables} {cmd:O=1 fail:false want: where:the orders example}]"
	if got != want {
		t.Fatalf("steps:\n%s\nwant\n%s", got, want)
	}
	if !transcriptPattern("line ... end").MatchString("line anything\nat all end\n") || transcriptPattern("a ... b").MatchString("a x c") {
		t.Fatal("wildcards")
	}
	if _, err := transcriptSteps(strings.Replace(doc, "$ cat f", "cat f", 1)); err == nil {
		t.Fatal("an output block the transcript cannot check was accepted")
	}
	if got := string(logLine.ReplaceAll([]byte("time=07:54:24 msg=x\nquery q\ntime=07:54:25 level=WARN msg=y\n"), nil)); got != "query q\n" {
		t.Fatalf("log lines kept: %q", got)
	}
}

// TestREADMETranscript runs the lifecycle section of the README verbatim.
func TestREADMETranscript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the README's lifecycle")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	root, bin := buildBinary(t, t.TempDir())
	doc, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := transcriptSteps(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	// A fresh directory with the repository's scripts, as a clone has.
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "scripts"), filepath.Join(dir, "scripts")); err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	ports := map[string]string{"127.0.0.1:9000": freeAddr(t), "127.0.0.1:8545": freeAddr(t),
		"127.0.0.1:8546": freeAddr(t), "127.0.0.1:4040": freeAddr(t)}
	cmd := exec.Command("bash", "-c", transcriptScript(steps, logs, ports))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "ETHSTREAM_BIN="+bin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	t.Cleanup(func() {
		for _, p := range processesOf(bin) {
			syscall.Kill(p, syscall.SIGKILL)
			t.Errorf("the transcript left pid %d running", p)
		}
	})
	for n, s := range steps {
		rcText, err := os.ReadFile(filepath.Join(logs, strconv.Itoa(n)+".rc"))
		if err != nil {
			t.Fatalf("README %s: `%s` never ran (the script stopped before it: %v)\n%s", s.where, s.cmd, runErr, out.String())
		}
		raw, _ := os.ReadFile(filepath.Join(logs, strconv.Itoa(n)+".out"))
		got := logLine.ReplaceAll(raw, nil)
		rc := strings.TrimSpace(string(rcText))
		switch {
		case s.fail && rc == "0":
			t.Fatalf("README %s: `%s` succeeded; the README shows it refused:\n%s", s.where, s.cmd, got)
		case !s.fail && rc != "0":
			t.Fatalf("README %s: `%s` exited %s:\n%s%s", s.where, s.cmd, rc, got, serverOutput(steps[:n], logs))
		}
		if tm, err := os.ReadFile(filepath.Join(logs, strconv.Itoa(n)+".time")); err == nil {
			// The slow steps, for the suite's budget (go test -v shows them).
			var t0, t1 float64
			if _, err := fmt.Sscan(string(tm), &t0, &t1); err == nil && t1-t0 >= 2 {
				t.Logf("%5.1fs  README %s: %s", t1-t0, s.where, s.cmd)
			}
		}
		if s.want != "" && !transcriptPattern(s.want).Match(got) {
			t.Errorf("README %s: `%s` printed\n%s\nthe README shows\n%s", s.where, s.cmd, got, s.want)
		}
	}
	if runErr != nil {
		t.Fatalf("transcript: %v\n%s", runErr, out.String())
	}
}

// serverOutput is what the background servers among steps printed, for a
// failure that may be theirs.
func serverOutput(steps []transcriptStep, logs string) string {
	var b strings.Builder
	for n, s := range steps {
		if strings.HasSuffix(s.cmd, "&") {
			raw, _ := os.ReadFile(filepath.Join(logs, strconv.Itoa(n)+".out"))
			fmt.Fprintf(&b, "\nserver `%s` printed:\n%s", s.cmd, raw)
		}
	}
	return b.String()
}
