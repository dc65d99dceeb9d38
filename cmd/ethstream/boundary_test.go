package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
)

// TestPanicIsACodedError: a panic below a command (a bug) ends as
// INTERNAL_ERROR with exit 3 and no stack trace.
func TestPanicIsACodedError(t *testing.T) {
	c := &cobra.Command{Use: "panics-for-test", Hidden: true, RunE: func(_ *cobra.Command, args []string) error {
		xs := []int{}
		return errors.New(strings.Repeat("x", xs[len(args)])) // index out of range: a runtime panic
	}}
	rootCmd.AddCommand(c)
	defer rootCmd.RemoveCommand(c)
	var out, errOut bytes.Buffer
	code := execute(context.Background(), []string{"panics-for-test"}, &out, &errOut)
	if code != 3 || !strings.HasPrefix(errOut.String(), "error: INTERNAL_ERROR: ") || strings.Contains(errOut.String(), "goroutine") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// TestExhaustedResourcesAreCoded: ENOSPC and EMFILE print their own codes
// with the path, even when another coded error wraps them.
func TestExhaustedResourcesAreCoded(t *testing.T) {
	full := &fs.PathError{Op: "write", Path: "/ck/offsets/.7.0123456789abcdef.tmp", Err: syscall.ENOSPC}
	if got := formatError(errors.Join(errors.New("publish"), full)); !strings.HasPrefix(got, "DISK_FULL: ") || !strings.Contains(got, full.Path) || !strings.Contains(got, "To fix: ") {
		t.Fatalf("ENOSPC: %q", got)
	}
	if got := formatError(&fs.PathError{Op: "open", Path: "/t", Err: syscall.EMFILE}); !strings.HasPrefix(got, "TOO_MANY_OPEN_FILES: ") {
		t.Fatalf("EMFILE: %q", got)
	}
}
