package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
