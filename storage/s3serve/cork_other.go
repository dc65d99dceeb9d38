//go:build !linux

package s3serve

import "syscall"

// setCork has no TCP_CORK here: the header goes out in a segment of its own.
func setCork(syscall.RawConn, bool) {}
