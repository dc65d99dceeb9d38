package s3serve

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setCork sets or clears TCP_CORK on the connection behind rc; a failure
// leaves the socket as it was, which costs a segment, not correctness.
func setCork(rc syscall.RawConn, on bool) {
	v := 0
	if on {
		v = 1
	}
	_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, v) })
}
