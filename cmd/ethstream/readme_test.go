package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// synopsis is one line per runnable command: "ethstream <path> <Use args>".
func synopsis() []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.Hidden {
			return // cobra's own, added on the first Execute
		}
		if c.Runnable() && c != rootCmd {
			line := c.CommandPath()
			if _, args, ok := strings.Cut(c.Use, " "); ok {
				line += " " + args
			}
			out = append(out, line)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd)
	return out
}

// readmeBlocks returns the fenced blocks of the README with their info
// string ("sh", "" ...) and the heading of the section they are in.
type fenced struct {
	lang, section, body string
}

func readmeBlocks(t *testing.T, path string) []fenced {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []fenced
	section := ""
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			section = strings.TrimPrefix(l, "## ")
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		f := fenced{lang: strings.TrimPrefix(l, "```"), section: section}
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body = append(body, lines[i])
		}
		f.body = strings.Join(body, "\n")
		out = append(out, f)
	}
	return out
}

// shellCommands keeps the ethstream commands and the variable assignments of
// a sh block (continuation lines joined, a trailing & dropped): nothing else
// in a README block is run by a test.
func shellCommands(body string) string {
	var keep []string
	joined := strings.ReplaceAll(body, "\\\n", " ")
	for _, l := range strings.Split(joined, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, "  # "); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		l = strings.TrimSuffix(l, " &")
		// eval "$(ethstream ...)": the command is checked; its assignments
		// come from the test's sample environment.
		if m := regexp.MustCompile(`^eval "\$\((ethstream [^)]*)\)"$`).FindStringSubmatch(l); m != nil {
			l = m[1]
		}
		if strings.HasPrefix(l, "ethstream ") || regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(l) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestREADMECommands: every ethstream command in the README's sh blocks
// parses as the CLI would parse it (command, flags, every source URI, conf and
// trigger), and the Commands section lists exactly the commands that exist,
// each with its real synopsis.
func TestREADMECommands(t *testing.T) {
	blocks := readmeBlocks(t, "../../README.md")
	n := 0
	var script strings.Builder
	for _, b := range blocks {
		if b.lang == "sh" {
			script.WriteString(shellCommands(b.body) + "\n")
		}
	}
	for _, args := range commandLines(t, script.String(), sampleEnv...) {
		validateCommand(t, args)
		n++
	}
	if n < 8 {
		t.Fatalf("only %d ethstream commands found in the README", n)
	}
	var listed []string
	for _, b := range blocks {
		if b.section == "Commands" && b.lang == "" {
			for _, l := range strings.Split(b.body, "\n") {
				if strings.HasPrefix(l, "ethstream ") {
					listed = append(listed, l)
				}
			}
		}
	}
	want := synopsis()
	if strings.Join(listed, "\n") != strings.Join(want, "\n") {
		t.Errorf("README Commands section:\n%s\nwant (from the commands' Use lines):\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}
}
