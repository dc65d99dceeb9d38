package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

func TestUnknownCommandFailsWithCode(t *testing.T) {
	var out, errOut bytes.Buffer
	code := execute(context.Background(), []string{"no-such-command"}, &out, &errOut)
	if code == 0 {
		t.Fatal("unknown command exited 0")
	}
	if !strings.HasPrefix(errOut.String(), "error: ") {
		t.Fatalf("stderr = %q", errOut.String())
	}
}

// A coded error wrapped with context prints its code once, in front.
func TestFormatErrorCodeOnce(t *testing.T) {
	inner := errcode.New("RPC_UNAVAILABLE", "", "start the node", "eth_blockNumber failed after 3 attempts")
	err := fmt.Errorf("batch 4: latest offset of source %q: %w", "eth_live", inner)
	got := formatError(err)
	want := `RPC_UNAVAILABLE: batch 4: latest offset of source "eth_live": eth_blockNumber failed after 3 attempts. To fix: start the node`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := formatError(inner); got != inner.Error() {
		t.Fatalf("unwrapped: %s", got)
	}
	if got := formatError(errors.New("disk full")); got != "RUNTIME_ERROR: disk full" {
		t.Fatalf("uncoded: %s", got)
	}
}
