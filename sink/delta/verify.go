package delta

// Reading every file of a table in full, for `ethstream checkpoint verify`.

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethstream/ethstream/errcode"
)

// FileCheck is the outcome of verifying one file (or one step) of a table.
type FileCheck struct {
	Path string
	What string
	Err  error // nil: intact
}

// Verify reads every commit and checkpoint of the log, replays the latest
// snapshot, and reads every live data file in full (Parquet page checksums,
// the size its add action records). It goes on past damage and returns one
// FileCheck per file; err is only for a table it cannot list.
func (t *Table) Verify(ctx context.Context) ([]FileCheck, error) {
	l, err := t.list()
	if err != nil {
		return nil, err
	}
	var out []FileCheck
	for _, v := range l.commits {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		_, err := t.readCommit(v)
		out = append(out, FileCheck{Path: t.commitPath(v), What: fmt.Sprintf("commit %d", v), Err: err})
	}
	for _, v := range l.checkpoints {
		p := t.checkpointPath(v)
		_, err := t.readCheckpoint(p)
		if err != nil {
			err = corrupt(p, err, "checkpoint %d does not parse", v)
		}
		out = append(out, FileCheck{Path: p, What: fmt.Sprintf("checkpoint %d", v), Err: err})
	}
	s, err := t.Snapshot(ctx, -1)
	out = append(out, FileCheck{Path: t.logDir, What: "replay of the latest version", Err: err})
	if err != nil {
		return out, nil
	}
	for _, f := range s.Files() {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		p := t.filePath(f.Path)
		err := s.checkFiles([]AddFile{f})
		if err == nil {
			err = readGenericRows(t.fs, p, func(map[string]any) error { return nil })
			var ce *errcode.Error
			if err != nil && !errors.As(err, &ce) {
				err = dataFileError(err, p, "restore the file, or restore the table to a version that does not reference it", "read live data file")
			}
		}
		out = append(out, FileCheck{Path: p, What: fmt.Sprintf("data file of version %d", s.Version), Err: err})
	}
	return out, nil
}

// TxnAt is the txn action one commit of the log records for an application
// id: the streaming batch that commit wrote.
type TxnAt struct {
	TableVersion int64
	Path         string // the commit file
	TxnVersion   int64
}

// TxnHistory returns the txn versions the log's commit files record for
// appID (a query id), by ascending table version; commits without one are
// left out, and so are those the log no longer holds (before its oldest
// checkpoint). A commit that does not read is skipped: Verify reports it.
func (t *Table) TxnHistory(ctx context.Context, appID string) ([]TxnAt, error) {
	l, err := t.list()
	if err != nil {
		return nil, err
	}
	var out []TxnAt
	for _, v := range l.commits {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		acts, err := t.readCommit(v)
		if err != nil {
			continue
		}
		for _, a := range acts {
			if a.Txn != nil && a.Txn.AppID == appID {
				out = append(out, TxnAt{TableVersion: v, Path: t.commitPath(v), TxnVersion: a.Txn.Version})
			}
		}
	}
	return out, nil
}
