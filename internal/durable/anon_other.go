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

func writeAnon(*os.File, string, func(io.Writer) error) (int64, error) {
	return 0, errors.New("anonymous temp files need Linux")
}

func anonStep(string) {}
