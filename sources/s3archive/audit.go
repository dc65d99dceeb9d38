package s3archive

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

var _ stream.OffsetAuditor = (*Source)(nil)

// AuditOffset checks that the source log in metadataDir reaches the log id
// offset names (stream.OffsetAuditor): an offsets entry naming an id its
// log never wrote means log files are missing or the entry was replaced,
// and the next batch would read from a log that does not hold it. It
// reads the directory listing only.
func (s *Source) AuditOffset(_ context.Context, fs vfs.FS, metadataDir string, offset stream.Offset, offsetsPath string) error {
	n, err := parseOffset(offset)
	if err != nil || n < 0 {
		return nil // Open refuses an offset it cannot read
	}
	l := &fileLog{fs: fs, dir: metadataDir}
	keys, err := l.log(false).List()
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil // no log here: Open decides (a source that never admitted a file, or a refused start)
	}
	if last := keys[len(keys)-1].ID; last < n {
		return errcode.Corrupt(metadataDir, nil,
			"%s names file source log id %d, but its log %s ends at id %d: log files are missing, or the offsets entry was replaced",
			offsetsPath, n, metadataDir, last)
	}
	return nil
}
