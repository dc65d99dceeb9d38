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

// The README transcript: the lifecycle section (its set-up block and
// phases 1-5) runs as written, in one bash in a fresh directory, and every
// output block shown below a command is compared with what the program
// prints. The README is the script; nothing here restates it.
//
// How a block is read:
//   - a ```sh block: each command (continuation lines joined) runs in turn
//     in the same shell, so variables carry over as in a reader's terminal.
//     Every command must succeed, except those of a block whose output
//     block is an error (below): they must fail.
//   - an output block whose first line is "$ CMD": CMD runs after the sh
//     block above it, and its output must match the rest of the block.
//   - any other output block is the whole output of the one command of
//     the sh block above it; the command must fail if, and only if, the
//     block shows an "error: " line.
//
// Placeholders, the only liberties taken: the servers' ports (127.0.0.1:9000
// and :8545 in the text) are replaced by free ones so the test can run
// beside anything; "batchTimestampMs" is a wall-clock time; "..." and "…"
// in an output block stand for any text. Every id, block number, hash and
// watermark is compared as printed: the demo preset is seeded, so they are
// the same on every machine.
//
// Phase 6 runs the demo's own query against a reorganising node (its
// figures are check 10 of the proof, compared with results/ by
// TestREADMEResults) and is not part of the transcript.

// transcriptStep is one command of the transcript and how to judge it.
type transcriptStep struct {
	cmd   string
	fail  bool   // the command must fail (a refusal the README shows)
	want  string // the expected output (an output block), or ""
	where string // where in the README, for messages
}

// transcriptSteps reads the lifecycle section of a README into steps.
func transcriptSteps(doc string) ([]transcriptStep, error) {
	i := strings.Index(doc, "## The lifecycle, phase by phase")
	j := strings.Index(doc, "### 6. ")
	if i < 0 || j < i {
		return nil, fmt.Errorf("README has no lifecycle section up to phase 6")
	}
	var steps []transcriptStep
	heading := "set-up"
	lines := strings.Split(doc[i:j], "\n")
	lastSh := -1 // index in steps of the first command of the last sh block
	for k := 0; k < len(lines); k++ {
		l := lines[k]
		if strings.HasPrefix(l, "### ") {
			heading = strings.TrimPrefix(l, "### ")
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
			lastSh = len(steps)
			for _, c := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
				if c = strings.TrimSpace(c); c != "" && !strings.HasPrefix(c, "#") {
					steps = append(steps, transcriptStep{cmd: c, where: heading})
				}
			}
		case lang == "" && strings.HasPrefix(text, "$ "):
			first, rest, _ := strings.Cut(text, "\n")
			steps = append(steps, transcriptStep{cmd: strings.TrimPrefix(first, "$ "), want: rest, where: heading})
		case lang == "":
			if lastSh < 0 || lastSh != len(steps)-1 || steps[lastSh].want != "" {
				return nil, fmt.Errorf("%s: an output block without \"$ CMD\" must follow a sh block of one command (the transcript cannot tell whose output it is):\n%s", heading, text)
			}
			steps[lastSh].want = text
			steps[lastSh].fail = strings.HasPrefix(text, "error: ") || strings.Contains(text, "\nerror: ")
		default:
			return nil, fmt.Errorf("%s: a ```%s block in the lifecycle: the transcript cannot run it", heading, lang)
		}
	}
	return steps, nil
}

// transcriptScript renders the steps as one bash script: each step's
// output and status land in dir/N.out and dir/N.rc; the first unexpected
// status stops the script.
func transcriptScript(steps []transcriptStep, dir string, ports map[string]string) string {
	var b strings.Builder
	b.WriteString("set -uo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n")
	for n, s := range steps {
		cmd := s.cmd
		for from, to := range ports {
			cmd = strings.ReplaceAll(cmd, from, to)
		}
		out := filepath.Join(dir, strconv.Itoa(n))
		if strings.HasSuffix(cmd, "&") {
			// A server: started in the background as the reader does; its
			// output goes to its own file, its status is not waited for.
			fmt.Fprintf(&b, "%s >%s.out 2>&1 &\necho 0 >%s.rc\n", strings.TrimSuffix(cmd, "&"), out, out)
			continue
		}
		fmt.Fprintf(&b, "%s >%s.out 2>&1\nrc=$?; echo $rc >%s.rc\n", cmd, out, out)
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

// batchTimestamp is a wall-clock time in an offsets entry.
var batchTimestamp = regexp.MustCompile(`"batchTimestampMs":\d+`)

func TestTranscriptSteps(t *testing.T) {
	doc := "## The lifecycle, phase by phase\n```sh\nA=1\nethstream run \\\n  --x &\n```\n" +
		"### 1. one\n```sh\nethstream run --bad\n```\n```\nerror: X: y. To fix: z\n```\n" +
		"```\n$ cat f\nline ... end\n```\n### 6. six\n```sh\nnot run\n```\n"
	steps, err := transcriptSteps(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", steps)
	want := "[{cmd:A=1 fail:false want: where:set-up} {cmd:ethstream run    --x & fail:false want: where:set-up} " +
		"{cmd:ethstream run --bad fail:true want:error: X: y. To fix: z where:1. one} {cmd:cat f fail:false want:line ... end where:1. one}]"
	if got != want {
		t.Fatalf("steps:\n%s\nwant\n%s", got, want)
	}
	if !transcriptPattern("line ... end").MatchString("line anything\nat all end\n") || transcriptPattern("a ... b").MatchString("a x c") {
		t.Fatal("wildcards")
	}
	if _, err := transcriptSteps(strings.Replace(doc, "$ cat f", "cat f", 1)); err == nil {
		t.Fatal("an output block the transcript cannot check was accepted")
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
	ports := map[string]string{"127.0.0.1:9000": freeAddr(t), "127.0.0.1:8545": freeAddr(t)}
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
		got, _ := os.ReadFile(filepath.Join(logs, strconv.Itoa(n)+".out"))
		rc := strings.TrimSpace(string(rcText))
		switch {
		case s.fail && rc == "0":
			t.Fatalf("README %s: `%s` succeeded; the README shows it refused:\n%s", s.where, s.cmd, got)
		case !s.fail && rc != "0":
			t.Fatalf("README %s: `%s` exited %s:\n%s", s.where, s.cmd, rc, got)
		}
		if s.want != "" && !transcriptPattern(s.want).Match(got) {
			t.Errorf("README %s: `%s` printed\n%s\nthe README shows\n%s", s.where, s.cmd, got, s.want)
		}
	}
	if runErr != nil {
		t.Fatalf("transcript: %v\n%s", runErr, out.String())
	}
}
