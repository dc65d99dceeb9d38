package filelog

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// AuditOffset checks that the file source log in dir reaches the log id
// offset names (a source's stream.OffsetAuditor): an offsets entry
// (offsetsPath) naming an id its log never wrote means log files are
// missing or the entry was replaced, and the next batch would read from a
// log that does not hold it. It reads the directory listing only; an
// offset it cannot read, or a directory without a log, is left to the
// source's Open.
func AuditOffset(fs vfs.FS, dir string, offset stream.Offset, offsetsPath string) error {
	n, err := ParseOffset(offset)
	if err != nil || n < 0 {
		return nil
	}
	keys, err := (&Log{FS: fs, Dir: dir}).log(false).List()
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	if last := keys[len(keys)-1].ID; last < n {
		return errcode.Corrupt(dir, nil,
			"%s names file source log id %d, but its log %s ends at id %d: log files are missing, or the offsets entry was replaced",
			offsetsPath, n, dir, last)
	}
	return nil
}
