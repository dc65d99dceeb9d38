package demo

// The demo's terminal layout: what it prints keeps to a terminal's 100
// columns (the phase commands and the checks are the wide parts).

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ethstream/ethstream/internal/textwrap"
)

// summaryWidth is the width the summary keeps to (a terminal's 100
// columns); only a word longer than a line passes it.
const summaryWidth = 100

// checkLine renders one check as the summary prints it: its result, its
// name and what it found (expected and actual both, when they differ),
// wrapped to width with continuation lines indented under the name.
func checkLine(c Check, width int) string {
	text := c.Name + ": " + c.Actual
	if !c.Figure && !c.Pass {
		text = c.Name + ": expected " + c.Expected + ", actual " + c.Actual
	}
	lines := strings.SplitAfter(strings.TrimSuffix(textwrap.Words(text, "", width-8), "\n"), "\n")
	for i := range lines {
		pad := "        "
		if i == 0 {
			pad = fmt.Sprintf("%-8s", c.Result())
		}
		lines[i] = pad + lines[i]
	}
	return strings.Join(lines, "") + "\n"
}

// commandLines renders a phase's command for the terminal as a reader
// would copy it into a shell: arguments quoted where the shell needs it, a
// flag kept with its value, wrapped at width with a continuation
// backslash. A unit longer than a line (a source URI) stands on a line of
// its own and passes the width: breaking it would change the command.
func commandLines(first string, args []string, width int) string {
	const indent = "      "
	var units []string
	for i := 0; i < len(args); i++ {
		u := shellQuote(args[i])
		if strings.HasPrefix(args[i], "-") && !strings.Contains(args[i], "=") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			u += " " + shellQuote(args[i])
		}
		units = append(units, u)
	}
	var b strings.Builder
	line := first
	for _, u := range units {
		if len(line)+1+len(u)+2 > width && line != indent {
			b.WriteString(line + " \\\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += u
	}
	b.WriteString(line + "\n")
	return b.String()
}

// shellSafe is what a shell word may hold unquoted.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_/.:=,@%+-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
