package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// ethstreamBinary builds this command once per test process, for tests that
// must run it as its own process (a terminal, the README's commands).
func ethstreamBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the ethstream binary")
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "ethstream-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "ethstream")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = &buildError{err, string(out)}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }
