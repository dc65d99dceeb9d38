package main

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/storage"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// store resolves one --checkpoint or --table value (a local path, file:// or
// s3://...) to the FS that holds it and the path inside that FS, through
// storage.Parse, the one location parser. It sends no request.
func store(ctx context.Context, flag, value string) (vfs.FS, string, error) {
	fs, paths, err := stores(ctx, location{flag, value})
	if err != nil {
		return nil, "", err
	}
	return fs, paths[0], nil
}

// location is a flag (or argument) naming a checkpoint, a table or a file
// in one, and its value.
type location struct{ flag, value string }

// stores resolves several locations to one FS holding them all (the local
// disk, or a storage.Mux when any is on S3) and each one's path in it, as
// run does for its checkpoint and table. It sends no request.
func stores(ctx context.Context, locs ...location) (vfs.FS, []string, error) {
	parsed := make([]storage.Location, len(locs))
	paths := make([]string, len(locs))
	for i, l := range locs {
		loc, err := storage.Parse(l.flag, l.value)
		if err != nil {
			return nil, nil, usage(err) // the command line alone is wrong
		}
		parsed[i], paths[i] = loc, loc.Path
	}
	fs, err := storage.NewFS(ctx, vfs.Default, parsed...)
	if err != nil {
		return nil, nil, usage(err)
	}
	return fs, paths, nil
}

// localFlags are the path flags that are always on the local disk.
var localFlags = map[string]bool{"local-dir": true, "progress": true, "workdir": true, "results": true,
	"out": true, "root": true, "archive": true, "cpuprofile": true, "duckdb": true, "readme": true}

// checkLocations refuses, before a command does anything, a path flag with a
// scheme it cannot store to: --checkpoint and --table take local paths,
// file:// and s3://; every other path flag only local paths. Positional
// checkpoint and table arguments go through the same parser (store).
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
