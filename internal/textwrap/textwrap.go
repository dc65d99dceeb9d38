// Package textwrap folds terminal output at a column width. The demo's
// summary and plan's report both promise output that fits 100 columns.
package textwrap

import "strings"

// Words wraps text at spaces to width, continuation lines starting with
// indent; a word longer than a line passes the width (a path or URI is
// never broken, so it can still be copied). The text's leading spaces are
// kept. The result ends in a newline.
func Words(text, indent string, width int) string {
	lead := text[:len(text)-len(strings.TrimLeft(text, " "))]
	var b strings.Builder
	line, fresh := lead, true
	for _, word := range strings.Fields(text) {
		if !fresh && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line, fresh = indent, true
		}
		if !fresh {
			line += " "
		}
		line += word
		fresh = false
	}
	b.WriteString(line + "\n")
	return b.String()
}

// Lines folds every line of text longer than width with Words, its
// continuation indented two spaces past the line's own indent; shorter
// lines pass unchanged.
func Lines(text string, width int) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		body := strings.TrimSuffix(line, "\n")
		if len(body) <= width {
			b.WriteString(line)
			continue
		}
		lead := body[:len(body)-len(strings.TrimLeft(body, " "))]
		b.WriteString(Words(body, lead+"  ", width))
	}
	return b.String()
}
