package main

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/storage"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// localFlags are the path flags that are always on the local disk.
var localFlags = map[string]bool{"local-dir": true, "progress": true, "workdir": true, "results": true,
	"out": true, "root": true, "archive": true, "cpuprofile": true, "duckdb": true, "readme": true}

// checkLocations refuses, before a command does anything, a path flag with a
// scheme it cannot store to: --checkpoint and --table take local paths,
// file:// and s3://; every other path flag only local paths.
func checkLocations(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		switch {
		case f.Name == "checkpoint" || f.Name == "table":
			_, err = storage.Parse("--"+f.Name, f.Value.String())
		case localFlags[f.Name]:
			err = storage.CheckLocal("--"+f.Name, f.Value.String())
		}
	})
	return err
}
