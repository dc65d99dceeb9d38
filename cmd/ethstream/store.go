package main

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/storage"
)

// store resolves a --checkpoint or --table value (a local path, file:// or
// s3://...) to the FS that holds it and the path inside that FS; any other
// scheme is UNSUPPORTED_LOCATION. It sends no request.
func store(ctx context.Context, flag, value string) (vfs.FS, string, error) {
	loc, err := storage.Parse(flag, value)
	if err != nil {
		return nil, "", err
	}
	fs, err := storage.NewFS(ctx, vfs.Default, loc)
	if err != nil {
		return nil, "", err
	}
	if loc.Kind != storage.S3 {
		return fs, value, nil
	}
	return fs, loc.Path, nil
}
