package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestListenersBindLoopback: every listening flag of every command refuses
// an address beyond loopback without --listen-public, from the command line
// alone (exit 2, nothing created, nothing served).
func TestListenersBindLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a listener that started anyway stops at once
	dir := t.TempDir()
	archive, _ := archiveURI(t)
	cmds := map[string][]string{
		"serve-s3 --addr":    {"serve-s3", "--root", dir},
		"node --addr":        {"node", "--archive", archive},
		"ui --ui-addr":       {"ui", "--checkpoint", dir},
		"run --ui-addr":      {"run", "--checkpoint", dir + "/ck", "--table", dir + "/tbl", "--source", "a=s3archive:file:///nonexistent/blocks"},
		"run --metrics-addr": {"run", "--checkpoint", dir + "/ck", "--table", dir + "/tbl", "--source", "a=s3archive:file:///nonexistent/blocks"},
		"demo --ui-addr":     {"demo", "--workdir", dir + "/work", "--results", dir + "/results"},
	}
	if len(cmds) != len(exposes) {
		t.Fatalf("the test covers %d listeners, exposes names %d", len(cmds), len(exposes))
	}
	for key := range exposes {
		base, ok := cmds[key]
		if !ok {
			t.Fatalf("no command line for %s", key)
		}
		flag := "--" + strings.SplitN(key, " --", 2)[1]
		for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:80"} {
			code, out, errOut := cli(t, ctx, append(append([]string{}, base...), flag, addr)...)
			checkRefusal(t, key+" "+addr, code, errOut, "INVALID_ARGUMENT", 2)
			if !strings.Contains(errOut, "--listen-public") || !strings.Contains(errOut, "beyond loopback") {
				t.Errorf("%s %s: the refusal does not name --listen-public: %q", key, addr, errOut)
			}
			if out != "" {
				t.Errorf("%s %s: served anyway: %q", key, addr, out)
			}
			if es, _ := os.ReadDir(dir); len(es) != 0 {
				t.Errorf("%s %s: created %v", key, addr, es)
			}
		}
	}
	// Loopback in every spelling passes the check (the listener then binds
	// or names its own reason).
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0", "127.0.0.2:0"} {
		if !isLoopback(addr) {
			t.Errorf("%s is not taken for loopback", addr)
		}
	}
}

// TestListenPublicLogsWhatIsExposed: with --listen-public a public address
// is accepted and the command says what it exposes, to whom.
func TestListenPublicLogsWhatIsExposed(t *testing.T) {
	c := &cobra.Command{Use: "serve-s3"}
	c.Flags().String("addr", "127.0.0.1:9000", "")
	registerListenPublic(c)
	var errOut bytes.Buffer
	c.SetErr(&errOut)
	if err := c.Flags().Parse([]string{"--addr", "0.0.0.0:9000", "--listen-public"}); err != nil {
		t.Fatal(err)
	}
	if err := checkListeners(c); err != nil {
		t.Fatalf("refused with --listen-public: %v", err)
	}
	want := "warning: --addr 0.0.0.0:9000 listens beyond loopback (--listen-public): it exposes " + exposes["serve-s3 --addr"]
	if !strings.Contains(errOut.String(), want) {
		t.Fatalf("stderr %q, want %q", errOut.String(), want)
	}
	errOut.Reset()
	if err := c.Flags().Parse([]string{"--addr", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	if err := checkListeners(c); err != nil || errOut.Len() != 0 {
		t.Fatalf("loopback: %v, stderr %q", err, errOut.String())
	}
}
