package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// ui refuses a missing checkpoint and a busy address with their codes,
// before serving anything.
func TestUICommandRefusals(t *testing.T) {
	var out, errOut bytes.Buffer
	missing := filepath.Join(t.TempDir(), "nope")
	if code := execute(context.Background(), []string{"ui", "--checkpoint", missing, "--ui-addr", "127.0.0.1:0"}, &out, &errOut); code == 0 ||
		!strings.HasPrefix(errOut.String(), "error: INVALID_ARGUMENT: ") || !strings.Contains(errOut.String(), missing) {
		t.Fatalf("missing checkpoint: exit %d, stderr %q", code, errOut.String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out.Reset()
	errOut.Reset()
	if code := execute(context.Background(), []string{"ui", "--checkpoint", t.TempDir(), "--ui-addr", ln.Addr().String()}, &out, &errOut); code == 0 ||
		!strings.HasPrefix(errOut.String(), "error: UI_ADDRESS_UNAVAILABLE: ") {
		t.Fatalf("busy address: exit %d, stderr %q", code, errOut.String())
	}
}
