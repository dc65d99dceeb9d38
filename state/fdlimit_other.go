//go:build !unix

package state

// rlimitNOFILE reports no limit where RLIMIT_NOFILE does not exist.
func rlimitNOFILE() (soft, hard uint64, ok bool) { return 0, 0, false }

func raiseNOFILE(uint64) bool { return false }
