package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestUnsupportedLocationsAreRefused: every path flag with a scheme ethstream
// cannot store to is UNSUPPORTED_LOCATION before anything is written: the
// working directory stays empty (no "gs:" or "s3:" directory appears).
func TestUnsupportedLocationsAreRefused(t *testing.T) {
	src := "--source=a=s3archive:file:///nonexistent/v1.0/eth/blocks"
	for _, args := range [][]string{
		{"run", "--checkpoint", "gs://bucket/q1/checkpoint", "--table", "t", src},
		{"run", "--checkpoint", "abfss://c@acct.dfs.core.windows.net/q1", "--table", "t", src},
		{"run", "--checkpoint", "ck", "--table", "s4://bucket/q1/table", src},
		{"run", "--checkpoint", "ck", "--table", "t", "--local-dir", "s3://bucket/cache", src},
		{"run", "--checkpoint", "ck", "--table", "t", "--progress", "gs://bucket/p.jsonl", src},
		{"plan", "--checkpoint", "gs://bucket/q1/checkpoint", "--table", "t", src},
		{"demo", "--workdir", "s3://bucket/work"},
		{"state", "dump", "--checkpoint", "gs://bucket/q1/checkpoint"},
		{"checkpoint", "inspect", "gs://bucket/q1/checkpoint"},
		{"table", "show", "abfss://c@acct/q1/table"},
	} {
		dir := t.TempDir()
		t.Chdir(dir)
		var out, errOut bytes.Buffer
		code := execute(context.Background(), args, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), "UNSUPPORTED_LOCATION") {
			t.Errorf("%q: exit %d, stderr %q; want UNSUPPORTED_LOCATION", args, code, errOut.String())
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%q created %v", args, entries)
		}
	}
}
