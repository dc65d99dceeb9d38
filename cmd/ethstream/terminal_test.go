package main

import (
	"bytes"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// screen is the visible text of a terminal after a byte stream: enough of
// ECMA-48 for what ethstream writes (CR, LF, erase line, erase to end of line);
// any other escape sequence fails the test, so nothing escapes the check.
type screen struct {
	lines []string
	row   int
	col   int
}

func (s *screen) feed(t *testing.T, b []byte) {
	t.Helper()
	s.lines = []string{""}
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '\r':
			s.col = 0
		case '\n':
			s.row++
			if s.row == len(s.lines) {
				s.lines = append(s.lines, "")
			}
		case 0x1b:
			m := regexp.MustCompile(`^\x1b\[([0-9]*)K`).Find(b[i:])
			if m == nil {
				t.Fatalf("unexpected escape sequence %q", b[i:min(len(b), i+8)])
			}
			line := []rune(s.lines[s.row])
			switch string(m[2 : len(m)-1]) {
			case "2":
				line = nil
				for range s.col {
					line = append(line, ' ')
				}
			case "", "0":
				line = line[:min(len(line), s.col)]
			}
			s.lines[s.row] = string(line)
			i += len(m) - 1
		default:
			r, n := []rune(string(b[i:min(len(b), i+4)]))[0], 1
			if c >= 0x80 {
				n = len(string(r))
			}
			line := []rune(s.lines[s.row])
			for len(line) < s.col {
				line = append(line, ' ')
			}
			if s.col < len(line) {
				line[s.col] = r
			} else {
				line = append(line, r)
			}
			s.lines[s.row] = string(line)
			s.col++
			i += n - 1
		}
	}
}

// TestRunProgressOnTerminal runs a backfill under a pseudo-terminal and checks
// the screen: log lines above one status line that was redrawn in place, with
// the file total, the blocks, one rate unit and an ETA or the elapsed time,
// and the run summary on a line of its own.
func TestRunProgressOnTerminal(t *testing.T) {
	bin := ethstreamBinary(t)
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	if out, err := exec.Command(bin, "gen-archive", "--out", archive, "--days", "3").CombinedOutput(); err != nil {
		t.Fatalf("gen-archive: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "run", "--checkpoint", filepath.Join(dir, "ck"), "--table", filepath.Join(dir, "tbl"),
		"--local-dir", filepath.Join(dir, "cache"),
		"--source", "s3_backfill=s3archive:file://"+filepath.Join(archive, "v1.0/eth/blocks")+"?maxFilesPerTrigger=1",
		"--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true",
		"--conf", "spark.sql.shuffle.partitions=4", "--trigger", "available-now")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&raw, tty); close(done) }()
	waitErr := cmd.Wait()
	select {
	case <-done: // EIO once the child closed its side
	case <-time.After(10 * time.Second):
		t.Fatal("pty output did not end")
	}
	tty.Close()
	if waitErr != nil {
		t.Fatalf("run: %v\n%q", waitErr, raw.String())
	}
	var s screen
	s.feed(t, raw.Bytes())
	text := strings.Join(s.lines, "\n")

	var bars []string
	summary := -1
	for i, l := range s.lines {
		if strings.HasPrefix(l, "backfill  ") {
			bars = append(bars, l)
		}
		if strings.HasPrefix(l, "query ") {
			summary = i
		}
		if strings.Contains(l, "msg=") && strings.Contains(l, "blocks/s") {
			t.Errorf("a log line and the status line share a line: %q", l)
		}
	}
	if len(bars) != 1 {
		t.Fatalf("want exactly one status line on screen, got %d:\n%s", len(bars), text)
	}
	bar := bars[0]
	for _, re := range []string{`batch 3\b`, `files 3/3  100%`, `blocks [0-9,]+ `, `[0-9,]+ blocks/s`, `done in [0-9.]+m?s`} {
		if !regexp.MustCompile(re).MatchString(bar) {
			t.Errorf("status line %q lacks %s", bar, re)
		}
	}
	if strings.Contains(bar, "blocks/hr") || strings.Count(bar, "/s") != 1 {
		t.Errorf("status line %q mixes rate units", bar)
	}
	// Redrawn in place: the raw stream drew the line once per event, the
	// screen shows it once.
	if n := strings.Count(raw.String(), "files "); n < 4 {
		t.Errorf("status line drawn %d times, want one redraw per batch", n)
	}
	if summary < 0 || !regexp.MustCompile(`^query \S+ run \S+: batches 0-3 \(3 data, 1 no-data, 0 control\)$`).MatchString(s.lines[summary]) {
		t.Errorf("no summary line of its own:\n%s", text)
	}
	if !strings.Contains(text, `msg="query started"`) || !strings.Contains(text, `msg=batch id=`) {
		t.Errorf("log lines missing:\n%s", text)
	}
	barRow := -1
	for i, l := range s.lines {
		if l == bar {
			barRow = i
		}
	}
	for i, l := range s.lines {
		if strings.Contains(l, "msg=") && i > barRow {
			t.Errorf("log line below the status line: %q", l)
		}
	}
	if barRow > summary {
		t.Errorf("summary above the status line:\n%s", text)
	}
}

// TestStateDumpAgreesWithTableShow: after a backfill, state dump and table
// show print the same columns in the same order and the same time format, so
// every key still in state is a row of the table, verbatim.
func TestStateDumpAgreesWithTableShow(t *testing.T) {
	bin := ethstreamBinary(t)
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	if out, err := exec.Command(bin, "gen-archive", "--out", archive, "--days", "2").CombinedOutput(); err != nil {
		t.Fatalf("gen-archive: %v\n%s", err, out)
	}
	ck, tbl := filepath.Join(dir, "ck"), filepath.Join(dir, "tbl")
	if out, err := exec.Command(bin, "run", "--checkpoint", ck, "--table", tbl, "--local-dir", filepath.Join(dir, "cache"),
		"--source", "s3_backfill=s3archive:file://"+filepath.Join(archive, "v1.0/eth/blocks"),
		"--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true",
		"--conf", "spark.sql.shuffle.partitions=4").CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	dump, err := exec.Command(bin, "state", "dump", "--checkpoint", ck).Output()
	if err != nil {
		t.Fatal(err)
	}
	show, err := exec.Command(bin, "table", "show", tbl).Output()
	if err != nil {
		t.Fatal(err)
	}
	dl := strings.Split(strings.TrimSpace(string(dump)), "\n")
	sl := strings.Split(strings.TrimSpace(string(show)), "\n")
	if want := "window_start,window_end,source,miner,count"; dl[0] != want+",partition" || sl[0] != want {
		t.Fatalf("headers: state dump %q, table show %q", dl[0], sl[0])
	}
	rows := map[string]bool{}
	for _, l := range sl[1:] {
		rows[l] = true
	}
	if len(dl) < 10 {
		t.Fatalf("state dump has %d lines", len(dl))
	}
	for _, l := range dl[1:] {
		row := l[:strings.LastIndexByte(l, ',')]
		if !rows[row] {
			t.Fatalf("state row %q is not a table row (first table rows: %q)", row, sl[1:3])
		}
	}
}
