package state

import (
	"fmt"
	"strconv"

	"github.com/ethstream/ethstream/errcode"
)

// CodeOpenFileLimit: the process may not open enough files for the state
// partitions asked for (each partition is a Pebble instance in the cache).
const CodeOpenFileLimit = "OPEN_FILE_LIMIT_TOO_LOW"

// File descriptors the cache needs, measured on Linux with Pebble v2 as this
// package configures it: an open partition held 8 (its directory handles,
// LOCK, MANIFEST and the memtable log Pebble keeps even without a WAL) plus
// its open sstables (one per partition in practice; the shared file cache
// bounds the total). Since leanFS (leanfs.go) it holds 1, its MANIFEST, plus
// the sstables; the check keeps the earlier figure, the one docs/contracts.md
// states, which leaves room. fdReserve covers the rest of the process:
// sockets, Parquet and Delta files, the checkpoint, the runtime.
const (
	fdsPerPartition = 9
	fdReserve       = 256
)

// The process's open-file limit; tests replace them.
var (
	fileLimit      = rlimitNOFILE
	raiseFileLimit = raiseNOFILE
)

// FilesNeeded is how many open files the cache of a state with to partitions
// needs while it replaces one of from partitions (0 for none): during a
// repartition the old generation closes in the background while the new one
// opens, so both count.
func FilesNeeded(from, to int) uint64 {
	return uint64(from+to)*fdsPerPartition + fdReserve
}

// CheckPartitions refuses, before anything is opened or written, a state of
// to partitions (replacing from) that the process's open-file limit
// (RLIMIT_NOFILE) cannot hold, and a count outside 1..10,000. The soft limit
// is raised towards the hard limit first when that is enough (the Go runtime
// raises it to the hard limit at start on Linux and macOS already).
func CheckPartitions(from, to int) error {
	if to < 1 || to > maxPartitions {
		return errcode.New(errcode.InvalidArgument, "", "use a count from 1 to "+strconv.Itoa(maxPartitions),
			"state partition count %d out of range", to)
	}
	need := FilesNeeded(from, to)
	soft, hard, ok := fileLimit()
	if !ok || need <= soft {
		return nil
	}
	if need <= hard && raiseFileLimit(need) {
		return nil
	}
	limit := soft
	if hard > limit {
		limit = hard
	}
	most := 0
	if limit > fdReserve {
		most = int((limit-fdReserve)/fdsPerPartition) - from
	}
	verb := "repartitioning state from " + strconv.Itoa(from) + " to " + strconv.Itoa(to) + " partitions needs"
	if from == 0 {
		verb = strconv.Itoa(to) + " state partitions need"
	}
	alt := "use fewer partitions"
	if most >= 1 {
		alt = fmt.Sprintf("use at most %d partitions", most)
	}
	return errcode.New(CodeOpenFileLimit, "",
		fmt.Sprintf("raise the open-file limit to at least %d (ulimit -n %d; above the hard limit %d, raise LimitNOFILE or /etc/security/limits.conf) or %s", need, need, hard, alt),
		"%s up to %d open files; this process may open %d", verb, need, limit)
}
