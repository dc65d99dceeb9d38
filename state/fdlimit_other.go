//go:build !unix

package state

// fileLimit reports no limit where RLIMIT_NOFILE does not exist.
func fileLimit() (soft, hard uint64, ok bool) { return 0, 0, false }

func raiseFileLimit(uint64) bool { return false }
