package errcode

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// Codes of exhausted resources and of damage between a checkpoint and the
// table it writes.
const (
	// DiskFull: a write failed with ENOSPC (or EDQUOT). Nothing partial is
	// visible: every durable file is published whole or not at all.
	DiskFull = "DISK_FULL"
	// TooManyOpenFiles: EMFILE or ENFILE.
	TooManyOpenFiles = "TOO_MANY_OPEN_FILES"
	// TableBehindCheckpoint: the sink's table has not recorded a batch the
	// checkpoint says is committed (a Delta commit removed, or the table
	// restored from an older backup). Raised before anything is written.
	TableBehindCheckpoint = "TABLE_BEHIND_CHECKPOINT"
	// Internal: a bug (a panic caught at the command boundary).
	Internal = "INTERNAL_ERROR"
)

// SpaceNeeder is implemented by errors that know how many bytes a failed
// write still had to write (durable's publish).
type SpaceNeeder interface{ NeededBytes() int64 }

// Resource returns the DISK_FULL or TOO_MANY_OPEN_FILES error err stands
// for, naming the path of the failed operation and, where known, the bytes
// still needed; nil when err is neither.
func Resource(err error) *Error {
	if err == nil {
		return nil
	}
	path := ""
	var pe *fs.PathError
	if errors.As(err, &pe) {
		path = pe.Path
	}
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		msg := "no space left on the device"
		var sn SpaceNeeder
		if errors.As(err, &sn) && sn.NeededBytes() > 0 {
			msg = fmt.Sprintf("no space left on the device: at least %d more bytes are needed", sn.NeededBytes())
		}
		return Wrap(err, DiskFull, path,
			"free space on that file system (or move the checkpoint, cache or table to a larger one) and start again; the next start recovers from the checkpoint",
			"%s", msg)
	case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE):
		return Wrap(err, TooManyOpenFiles, path,
			"raise the open file limit (ulimit -n, at least 4096) or use fewer state partitions, and start again",
			"too many open files")
	}
	return nil
}
