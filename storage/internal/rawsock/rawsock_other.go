//go:build !linux

package rawsock

import "syscall"

// supported: New gives no Conn off Linux.
const supported = false

func rawRead(uintptr, []byte) (int, syscall.Errno)  { return 0, syscall.ENOSYS }
func rawWrite(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }
