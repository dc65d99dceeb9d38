package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
)

// corruptCache flips bytes in every sstable and MANIFEST of the state
// cache, leaving its MARKER intact (the cache still claims to be current).
func corruptCache(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".sst") || strings.Contains(filepath.Base(p), "MANIFEST")) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i := len(b) / 8; i < len(b)*7/8; i += 5 {
			b[i] ^= 0x5a
		}
		n++
		return os.WriteFile(p, b, 0o644)
	})
	return n
}

// TestCorruptCacheThroughEveryCommand sends a corrupted state cache through
// every command that reads a checkpoint: none panics (exit 3, a stack
// trace); run and repartition rebuild the damaged partitions and succeed.
func TestCorruptCacheThroughEveryCommand(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	archive := filepath.Join(root, "archive")
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: archive, Preset: chain.RangePreset(chain.FirstDay, 2), Seed: 3}); err != nil {
		t.Fatal(err)
	}
	ck, tbl, cache := filepath.Join(root, "ck"), filepath.Join(root, "tbl"), filepath.Join(root, "cache")
	src := "arch=s3archive:file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"
	runArgs := []string{"run", "--checkpoint", ck, "--table", tbl, "--local-dir", cache, "--source", src,
		"--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true"}
	exec := func(args ...string) (int, string) {
		resetFlags(rootCmd)
		var out, errOut bytes.Buffer
		code := execute(ctx, args, &out, &errOut)
		return code, errOut.String()
	}
	if code, errOut := exec(append(runArgs, "--max-batches", "1")...); code != 0 {
		t.Fatalf("first run: %d %s", code, errOut)
	}
	cmds := []struct {
		args   []string
		mustOK bool
	}{
		{[]string{"checkpoint", "inspect", ck}, true},
		{[]string{"checkpoint", "verify", ck, "--table", tbl}, true},
		{[]string{"state", "dump", "--checkpoint", ck}, true},
		{[]string{"state", "dump", ck}, true},
		{[]string{"table", "show", tbl}, true},
		{[]string{"plan", "--checkpoint", ck, "--table", tbl, "--source", src, "--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true"}, true},
		{[]string{"checkpoint", "repartition", ck, "--partitions", "3", "--local-dir", cache}, true},
		{append(runArgs, "--conf", "spark.sql.shuffle.partitions=3"), true},
	}
	for _, c := range cmds {
		if corruptCache(t, cache) == 0 && c.args[0] == "run" {
			t.Fatal("no cache file to corrupt")
		}
		code, errOut := exec(c.args...)
		if code == 3 || strings.Contains(errOut, "panic") || strings.Contains(errOut, "goroutine ") {
			t.Fatalf("%v: exit %d with a panic:\n%s", c.args, code, errOut)
		}
		if c.mustOK && code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
	}
}
