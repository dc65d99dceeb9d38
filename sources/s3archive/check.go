package s3archive

import (
	"context"
	"errors"
	"io/fs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Codes of the start-time probe (Check).
const (
	// CodeArchiveNotFound: a file:// archive directory does not exist or is
	// not a directory.
	CodeArchiveNotFound = "ARCHIVE_NOT_FOUND"
	// CodeArchiveEmpty: the archive location lists no block file (*.parquet).
	CodeArchiveEmpty = "ARCHIVE_EMPTY"
)

var _ stream.Checker = (*Source)(nil)

// Check probes the archive before a start writes anything (stream.Checker):
// a file:// directory must exist, and the location (directory or S3 prefix)
// must list at least one block file, and the first of them (by name)
// must hold the configured columns (Options.Columns: a footer read, no
// column data). It lists once and keeps the listing for the first batch.
func (s *Source) Check(ctx context.Context) error {
	if ls, ok := s.st.(*localStore); ok {
		info, err := ls.fs.Stat(ls.root)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return errcode.New(CodeArchiveNotFound, ls.root, "check the file:// path: it names the directory holding the date=YYYY-MM-DD partitions (e.g. file:///data/v1.0/eth/blocks)",
				"archive directory %s does not exist", ls.root)
		case err != nil:
			return unreadable(err, s.opts.URI, "read archive directory")
		case !info.IsDir():
			return errcode.New(CodeArchiveNotFound, ls.root, "point the file:// URI at the directory holding the date=YYYY-MM-DD partitions, not at a file",
				"archive path %s is not a directory", ls.root)
		}
	}
	objs, err := s.st.list(ctx)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return errcode.New(CodeArchiveEmpty, s.opts.URI,
			"check the URI: it must name the directory (or S3 prefix) holding date=YYYY-MM-DD/*.parquet block files, e.g. s3://aws-public-blockchain/v1.0/eth/blocks",
			"no block files (*.parquet) under %s", s.opts.URI)
	}
	s.probed = objs
	// The first file the source would admit must hold its columns: files
	// of another table would otherwise pass the start, which creates the
	// checkpoint, and fail its first batch.
	first := objs[0]
	for _, o := range objs[1:] {
		if o.URI < first.URI {
			first = o
		}
	}
	return checkFileSchema(ctx, s.st, first.URI, first.Size, s.opts.Columns, s.m)
}
