package files

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/sources/internal/filelog"
	"github.com/ethstream/ethstream/stream"
)

var _ stream.OffsetAuditor = (*Source)(nil)

// AuditOffset checks that the source log in metadataDir reaches the log id
// offset names (stream.OffsetAuditor, filelog.AuditOffset).
func (s *Source) AuditOffset(_ context.Context, fs vfs.FS, metadataDir string, offset stream.Offset, offsetsPath string) error {
	return filelog.AuditOffset(fs, metadataDir, offset, offsetsPath)
}
