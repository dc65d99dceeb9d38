package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// runChainCmd runs the CLI with fresh flag values (cobra keeps them in the
// global command tree between executions).
func runChainCmd(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	for _, c := range rootCmd.Commands() {
		switch c.Name() {
		case "gen-archive", "serve-s3", "node":
			c.Flags().VisitAll(func(f *pflag.Flag) {
				_ = f.Value.Set(f.DefValue)
				f.Changed = false
			})
		}
	}
	var out, errOut bytes.Buffer
	code := execute(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestChainCommands(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "archive")
	code, out, errOut := runChainCmd(t, ctx, "gen-archive", "--out", dir, "--days", "1", "--seed", "4")
	if code != 0 || !strings.Contains(out, "1 files") || !strings.Contains(out, "26086569") {
		t.Fatalf("gen-archive: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runChainCmd(t, ctx, "gen-archive", "--out", t.TempDir(), "--from", "2021-08-05", "--days", "1")
	if code != 0 || !strings.Contains(out, "blocks 12") {
		t.Fatalf("gen-archive --from: %d %q %q", code, out, errOut)
	}
	// A cancelled context: the servers start, print their endpoint and stop.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	code, out, errOut = runChainCmd(t, cctx, "serve-s3", "--root", filepath.Dir(dir), "--addr", "127.0.0.1:0")
	if code != 0 || !strings.Contains(out, "http://127.0.0.1:") || !strings.Contains(out, "unauthenticated") || strings.Contains(out, "not served") {
		t.Fatalf("serve-s3: %d %q %q", code, out, errOut)
	}
	// A folder whose name is no bucket name is named at start.
	if err := os.Mkdir(filepath.Join(filepath.Dir(dir), "My_Data"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(secretKeyEnv, "s3cret")
	code, out, errOut = runChainCmd(t, cctx, "serve-s3", "--root", filepath.Dir(dir), "--addr", "127.0.0.1:0", "--access-key", "k1")
	if code != 0 || !strings.Contains(out, "signed (SigV4) with access key k1") || strings.Contains(out, "s3cret") ||
		!strings.Contains(out, "): My_Data\n") {
		t.Fatalf("serve-s3 --access-key: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runChainCmd(t, cctx, "node", "--archive", dir, "--addr", "127.0.0.1:0", "--initial-blocks", "2")
	if code != 0 || !strings.Contains(out, "continuing block 26086570") || !strings.Contains(out, "head 26086571") {
		t.Fatalf("node: %d %q %q", code, out, errOut)
	}
}

func TestChainCommandErrors(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		args []string
		code string
	}{
		{[]string{"gen-archive"}, "INVALID_ARGUMENT"},
		{[]string{"gen-archive", "--out", t.TempDir(), "--preset", "bogus"}, "INVALID_ARGUMENT"},
		{[]string{"gen-archive", "--out", t.TempDir(), "--days", "0"}, "INVALID_ARGUMENT"},
		{[]string{"gen-archive", "--out", file, "--days", "1"}, "ARCHIVE_OUTPUT_UNWRITABLE"},
		{[]string{"serve-s3", "--root", filepath.Join(t.TempDir(), "missing")}, "S3_ROOT_NOT_FOUND"},
		{[]string{"serve-s3", "--root", t.TempDir(), "--addr", busy}, "ADDRESS_IN_USE"},
		{[]string{"serve-s3", "--root", t.TempDir(), "--addr", "127.0.0.1:0", "--access-key", "k1"}, "INVALID_ARGUMENT"}, // no secret in the environment
		{[]string{"node", "--archive", t.TempDir()}, "ARCHIVE_NOT_FOUND"},
		{[]string{"node", "--archive", t.TempDir(), "--speed", "0"}, "INVALID_ARGUMENT"},
		{[]string{"gen-archive", "--out", t.TempDir(), "--from", "2014-01-01"}, "INVALID_ARGUMENT"},
		{[]string{"gen-archive", "--out", t.TempDir(), "--from", "2026-09-29", "--days", "2"}, "INVALID_ARGUMENT"},
	} {
		code, _, errOut := runChainCmd(t, ctx, c.args...)
		if code == 0 || !strings.HasPrefix(errOut, "error: "+c.code+": ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, errOut)
		}
	}
}
