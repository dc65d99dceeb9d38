package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestProgressCreatesItsDirectory: --progress in a fresh work directory
// needs no mkdir (the README's lifecycle starts from an empty W): the run
// creates the missing directories and appends one line per batch.
func TestProgressCreatesItsDirectory(t *testing.T) {
	_, arch := archiveURI(t)
	base := t.TempDir()
	progress := filepath.Join(base, "W", "progress", "phase1.jsonl")
	code, out, errOut := cli(t, context.Background(), "run", "--checkpoint", filepath.Join(base, "ck"), "--table", filepath.Join(base, "tbl"),
		"--local-dir", filepath.Join(base, "cache"), "--source", "s3_backfill=s3archive:"+arch, "--conf", evolution, "--progress", progress)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	f, err := os.Open(progress)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines++
	}
	if lines == 0 {
		t.Fatalf("%s is empty", progress)
	}
	// Off a terminal each batch is one log line, in the one format
	// (pipeline.LogBatches), the watermark in one form, within 100 columns.
	logged := 0
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if strings.Contains(l, "batch") && strings.Contains(l, "id=") {
			logged++
			if !regexp.MustCompile(`^time=\d\d:\d\d:\d\d msg=batch id=\d+ kind=\S+ rows=\d+ ms=\d+ watermark=(-|\S+Z)$`).MatchString(l) || len(l) > 100 {
				t.Errorf("batch log line %q", l)
			}
		}
		if strings.Contains(l, "watermarkMs") {
			t.Errorf("the watermark in a second form: %q", l)
		}
	}
	if logged != lines {
		t.Errorf("%d batch log lines for %d batches:\n%s", logged, lines, errOut)
	}
}
