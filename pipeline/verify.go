package pipeline

// `ethstream checkpoint verify`: every file of a checkpoint and of its table
// read in full, and the two compared.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/state"
)

// VerifyCheck is one verified file or step.
type VerifyCheck struct {
	Path string
	What string
	Err  error // nil: intact
}

// VerifyReport lists every check; Damaged counts the failed ones.
type VerifyReport struct {
	Checks  []VerifyCheck
	Damaged int
}

func (r *VerifyReport) add(path, what string, err error) {
	r.Checks = append(r.Checks, VerifyCheck{Path: path, What: what, Err: err})
	if err != nil {
		r.Damaged++
	}
}

// Print writes one line per check ("ok" or "DAMAGED" with the error) and a
// summary.
func (r *VerifyReport) Print(w io.Writer) {
	for _, c := range r.Checks {
		if c.Err != nil {
			fmt.Fprintf(w, "DAMAGED  %s (%s): %v\n", c.Path, c.What, c.Err)
		} else {
			fmt.Fprintf(w, "ok       %s (%s)\n", c.Path, c.What)
		}
	}
	fmt.Fprintf(w, "%d files checked, %d damaged\n", len(r.Checks), r.Damaged)
}

// Verify reads, locking and writing nothing, every file of the checkpoint
// dir (metadata, every offsets and commits entry, the file sources' logs,
// every retained state version in full) and, when table is set, every file
// of the Delta table (Table.Verify), then checks that the table records the
// checkpoint's last committed batch for its query id. It goes on past damage;
// the error is for a directory that is not a checkpoint.
func Verify(ctx context.Context, fs vfs.FS, dir, table string) (*VerifyReport, error) {
	if fs == nil {
		fs = vfs.Default
	}
	d := checkpoint.Dir{FS: fs, Path: dir}
	snap, err := d.ReadExisting()
	var ce *errcode.Error
	if err != nil && (!errors.As(err, &ce) || ce.Code != errcode.CheckpointCorrupt) {
		return nil, err
	}
	rep := &VerifyReport{}
	rep.add(d.Join(checkpoint.MetadataFile), "metadata and latest entries", err)
	ids, err := d.ListOffsets()
	rep.add(d.Join(checkpoint.OffsetsDir), "offsets listing", err)
	for _, id := range ids {
		_, err := d.ReadOffsets(id)
		rep.add(d.OffsetsPath(id), "offsets entry", err)
	}
	ids, err = d.ListCommits()
	rep.add(d.Join(checkpoint.CommitsDir), "commits listing", err)
	for _, id := range ids {
		_, err := d.ReadCommit(id)
		rep.add(d.CommitPath(id), "commit entry", err)
	}
	keys, _ := fs.List(d.Join(checkpoint.SourcesDir))
	for _, key := range keys {
		_, err := d.ReadSourceLog(key)
		rep.add(d.Join(checkpoint.SourcesDir, key), "source log", err)
	}
	committed := int64(-1)
	if snap != nil {
		committed = snap.CommittedID
	}
	if snap != nil && snap.CheckStateProvider() != nil {
		committed = -2 // another provider's state: not ours to read
	}
	ops, err := fs.List(d.Join(checkpoint.StateDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		rep.add(d.Join(checkpoint.StateDir), "state listing", err)
	}
	for _, op := range ops {
		if committed == -2 {
			break
		}
		sd := d.Join(checkpoint.StateDir, op)
		sr, err := state.Verify(ctx, fs, sd, committed)
		rep.add(sd, fmt.Sprintf("state: %d versions, %d files, %d bytes", sr.Versions, sr.Files, sr.Bytes), err)
	}
	if table == "" {
		return rep, ctx.Err()
	}
	t, err := delta.OpenFS(ctx, fs, table)
	if err != nil {
		rep.add(table, "delta table", err)
		return rep, ctx.Err()
	}
	checks, err := t.Verify(ctx)
	if err != nil {
		return rep, err
	}
	for _, c := range checks {
		rep.add(c.Path, c.What, c.Err)
	}
	sink, err := delta.NewMergeSink(delta.SinkOptions{Path: table, FS: fs})
	if err == nil {
		err = engine.CheckSink(ctx, fs, dir, sink)
	}
	rep.add(table, "table records the checkpoint's last committed batch", err)
	return rep, ctx.Err()
}
