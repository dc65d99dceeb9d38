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
	// CheckpointBehindTable: the table records a batch of the query id more
	// than one past the checkpoint's last commit (the checkpoint restored
	// from an older backup than the table): new batches would reuse ids
	// the table holds under other offsets, and the sink would skip their
	// rows. Raised before anything is written.
	CheckpointBehindTable = "CHECKPOINT_BEHIND_TABLE"
	// CheckpointCopyIncomplete: the checkpoint is the destination of a
	// `checkpoint copy` that did not finish (its marker is there); running
	// the copy again completes it.
	CheckpointCopyIncomplete = "CHECKPOINT_COPY_INCOMPLETE"
	// Internal: a bug (a panic caught at the command boundary).
	Internal = "INTERNAL_ERROR"
	// ReadOnlyStorage: a write to the checkpoint, the state cache or the
	// table was refused because the storage is read-only (EROFS, EACCES or
	// EPERM on the local disk; 403 AccessDenied on an S3 write). It names
	// the path; it is not a lock held by another query.
	ReadOnlyStorage = "READ_ONLY_STORAGE"
	// StorageCredentials: an S3 request found no credentials to sign with,
	// or the server refused them (unknown key, bad signature, access denied
	// on a read).
	StorageCredentials = "STORAGE_CREDENTIALS"
	// StorageUnavailable: an S3 request failed transiently (5xx,
	// throttling, reset, timeout) until its retry budget was spent; it
	// names the endpoint and the last error.
	StorageUnavailable = "STORAGE_UNAVAILABLE"
	// StorageWriteLost: an S3 store acknowledged a PUT but, read back,
	// does not hold the bytes written (an empty or short object, another
	// checksum). The write failed before anything referred to the object
	// (the object is removed), so nothing committed is lost.
	StorageWriteLost = "STORAGE_WRITE_LOST"
	// TargetMissed: `ethstream bench` measured a figure above its target
	// (docs/contracts.md, Targets); raised after the tables are printed and
	// the JSON written, so that the exit status says so.
	TargetMissed = "TARGET_MISSED"
)

// SpaceNeeder is implemented by errors that know how many bytes a failed
// write still had to write (durable's publish).
type SpaceNeeder interface{ NeededBytes() int64 }

// Resource returns the error of the environment err stands for, whatever
// other coded error it surfaced in (a table probe that met a read-only disk
// or a dead S3 endpoint is not a bad argument): DISK_FULL or
// TOO_MANY_OPEN_FILES naming the path of the failed operation and, where
// known, the bytes still needed; READ_ONLY_STORAGE for EROFS, EACCES or
// EPERM; or the READ_ONLY_STORAGE, STORAGE_CREDENTIALS or
// STORAGE_UNAVAILABLE or STORAGE_WRITE_LOST error of an object store found in its chain. nil
// when err is none of these.
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
	case errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		if e := storageCause(err); e != nil {
			return e
		}
		what := "the file system is read-only"
		if !errors.Is(err, syscall.EROFS) {
			what = "permission denied"
		}
		return Wrap(err, ReadOnlyStorage, path,
			"make the location writable by this user (or mount it read-write), or use another location; nothing partial was written",
			"cannot write: %s", what)
	}
	return storageCause(err)
}

// storageCause returns the first error in err's chain coded by an object
// store for a cause of its own, nil if none.
func storageCause(err error) *Error {
	var e *Error
	for errors.As(err, &e) {
		switch e.Code {
		case ReadOnlyStorage, StorageCredentials, StorageUnavailable, StorageWriteLost:
			return e
		}
		err = e.Err
	}
	return nil
}
