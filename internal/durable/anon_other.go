//go:build !linux

package durable

import (
	"errors"
	"io"
	"os"
)

// anonPool has no anonymous files off Linux: every publish creates a named
// temp file.
type anonPool struct{}

var anonFiles = &anonPool{}

func (*anonPool) take(string) *os.File { return nil }

func publishAnon(*os.File, string, func(io.Writer) error, <-chan error) (int64, bool, error) {
	return 0, false, errors.New("anonymous temp files need Linux")
}
