//go:build unix

package state

import "syscall"

// fileLimit returns the soft and hard RLIMIT_NOFILE.
func fileLimit() (soft, hard uint64, ok bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, false
	}
	return uint64(r.Cur), uint64(r.Max), true
}

// raiseFileLimit raises the soft limit to n (at most the hard limit).
func raiseFileLimit(n uint64) bool {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || uint64(r.Max) < n {
		return false
	}
	r.Cur = r.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r) == nil
}
