package demo

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commands returns the commands a script printed ("$ cmd args", a trailing
// redirection dropped), split into arguments as the shell reads them (the
// scripts quote an argument with special characters in single quotes).
func commands(out string) [][]string {
	var cmds [][]string
	for _, l := range strings.Split(out, "\n") {
		l, ok := strings.CutPrefix(l, "$ ")
		if !ok {
			continue
		}
		if i := strings.Index(l, " >"); i >= 0 {
			l = l[:i]
		}
		cmds = append(cmds, shellWords(l))
	}
	return cmds
}

// shellWords splits a printed command line into words: blanks separate them,
// single quotes keep what they hold, a backslash keeps the next character.
func shellWords(l string) []string {
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			w.WriteByte(c)
		case c == '\'':
			quoted, in = true, true
		case c == '\\' && i+1 < len(l):
			i++
			w.WriteByte(l[i])
			in = true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// lifecycleCommands expands the ethstream commands of the README's lifecycle
// section with bash, as a reader would run them.
func lifecycleCommands(t *testing.T, readme string, env []string) [][]string {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## The lifecycle, phase by phase")
	j := strings.Index(doc, "## The proof")
	if i < 0 || j < i {
		t.Fatal("README has no lifecycle section")
	}
	var script strings.Builder
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc[i:j], -1) {
		for _, l := range strings.Split(strings.ReplaceAll(m[1], "\\\n", " "), "\n") {
			l = strings.TrimSuffix(strings.TrimSpace(l), " &")
			if strings.HasPrefix(l, "ethstream ") || regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(l) {
				script.WriteString(l + "\n")
			}
		}
	}
	cmd := exec.Command("bash", "-c", "set -eu\nethstream() { printf '%s\\0' \"$@\"; printf '\\n\\0'; }\n"+script.String())
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("expand README commands: %v\n%s", err, script.String())
	}
	var cmds [][]string
	var cur []string
	for _, a := range strings.Split(string(out), "\x00") {
		switch a {
		case "\n":
			cmds = append(cmds, cur)
			cur = nil
		case "":
		default:
			cur = append(cur, a)
		}
	}
	return cmds
}

// checkREADMECommands compares the README's lifecycle commands with the
// commands the scripts printed, after mapping the test's work directory,
// binary and ports to the scripts' defaults: the servers and every run,
// in order.
func checkREADMECommands(t *testing.T, readme string, scripts [][]string, work, bin string, env []string, addrs map[string]string) {
	t.Helper()
	norm := func(a string) string {
		a = strings.ReplaceAll(a, work, "work/scripts")
		for from, to := range addrs {
			a = strings.ReplaceAll(a, from, to)
		}
		return a
	}
	pick := func(cmds [][]string, fromScripts bool) []string {
		var out []string
		for _, c := range cmds {
			if fromScripts {
				if len(c) == 0 || c[0] != bin {
					continue
				}
				c = c[1:]
			}
			if len(c) == 0 {
				continue
			}
			if c[0] == "run" && !strings.Contains(strings.Join(c, " "), "--checkpoint work/scripts/checkpoint") &&
				!strings.Contains(strings.Join(c, " "), "--checkpoint "+work+"/checkpoint") {
				continue // a phase the demo runs on a query of its own (live_reorgs)
			}
			if c[0] == "node" && slices.Contains(c, "--reorg-rate") {
				continue // phase 6's reorganising node, which the scripts do not start
			}
			switch c[0] {
			case "run", "serve-s3", "node":
				var n []string
				for _, a := range c {
					n = append(n, norm(a))
				}
				out = append(out, strings.Join(n, " "))
			}
		}
		return out
	}
	got := pick(lifecycleCommands(t, readme, env), false)
	want := pick(scripts, true)
	// The scripts start the servers once; the README shows them once.
	if len(got) < 6 {
		t.Fatalf("README lifecycle has %d commands:\n%s", len(got), strings.Join(got, "\n"))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("README lifecycle commands:\n%s\n\nthe scripts ran:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestREADMEResults: the README's results sections are what the reference
// run in results/ wrote (ethstream demo --readme README.md renders them).
func TestREADMEResults(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := RenderREADME(string(b), filepath.Join("..", "results"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Error("README results sections differ from results/: run `go run ./cmd/ethstream demo --readme README.md`")
	}
}

func TestShellWords(t *testing.T) {
	got := shellWords(`bin run --source 's=x:a?b=1&c=2' 'it'\''s' a\ b  --x=1`)
	want := []string{"bin", "run", "--source", "s=x:a?b=1&c=2", "it's", "a b", "--x=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
	// What the scripts print, read back by bash, gives the same words.
	line := `'/tmp/w x/ethstream' run --source 's=x:a?b=1&c=2' 'it'\''s'`
	out, err := exec.Command("bash", "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !slices.Equal(shellWords(line), w) {
		t.Fatalf("%q, bash reads %q", shellWords(line), w)
	}
}
