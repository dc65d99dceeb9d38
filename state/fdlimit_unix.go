//go:build unix

package state

import "syscall"

// rlimitNOFILE returns the soft and hard RLIMIT_NOFILE.
func rlimitNOFILE() (soft, hard uint64, ok bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, false
	}
	return uint64(r.Cur), uint64(r.Max), true
}

// raiseNOFILE raises the soft limit to the hard limit if that is at least n.
func raiseNOFILE(n uint64) bool {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || uint64(r.Max) < n {
		return false
	}
	r.Cur = r.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r) == nil
}
