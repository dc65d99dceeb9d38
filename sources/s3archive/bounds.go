package s3archive

import (
	"io"

	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/parquet-go/parquet-go/format"
)

// checkBounds is columnar.CheckBounds (the bounds a file's metadata must
// keep before the decoder allocates by it) as ARCHIVE_FILE_UNREADABLE
// naming uri and the first field out of bounds.
func checkBounds(md *format.FileMetaData, rr io.ReaderAt, size, footer int64, leaves []int, uri string) error {
	if err := columnar.CheckBounds(md, rr, size, footer, leaves); err != nil {
		return unreadable(nil, uri, "%v", err)
	}
	return nil
}
