package delta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// CodeTablePathNotADirectory: the table path (or a directory above it) is a
// file, so the table can be neither read nor created there.
const CodeTablePathNotADirectory = "DELTA_TABLE_PATH_NOT_A_DIRECTORY"

var _ stream.Checker = (*MergeSink)(nil)

// Check is the sink's part of a start's validation (stream.Checker), reading
// only: the path must be a directory or creatable as one, and a table already
// there must have a protocol this writer supports and the sink's schema. Open
// creates the table; Check creates nothing.
func (m *MergeSink) Check(ctx context.Context) error {
	root, err := resolveRoot(m.o.Path)
	if err != nil {
		return err
	}
	fs := m.o.FS
	for p := root; ; p = filepath.Dir(p) {
		info, err := fs.Stat(p)
		if (errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) && filepath.Dir(p) != p {
			continue // created by Open, or a file above it that the loop reports
		}
		if err != nil {
			return errcode.Wrap(err, errcode.InvalidArgument, p, "check the --table path and its permissions", "cannot read the table location")
		}
		if !info.IsDir() {
			return errcode.New(CodeTablePathNotADirectory, p, "point --table at a directory: an empty or new one, or one holding a Delta table",
				"table path %s is a file, not a directory", p)
		}
		if p != root {
			return nil // a new table under an existing directory
		}
		break
	}
	t, err := OpenFS(ctx, fs, root)
	if errcode.Is(err, CodeNotATable) {
		return nil // Open creates it
	}
	if err != nil {
		return err
	}
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		return err
	}
	if len(m.o.Schema.Fields) == 0 {
		// The output schema arrives at Open (SinkEnv.Schema), which
		// compares it then; a table this writer cannot write is refused now.
		return checkWriteProtocol(s.Protocol, t.logDir)
	}
	l, err := sinkLayout(m.o.Schema, m.o.KeyColumns, root)
	if err != nil {
		return err
	}
	return checkSinkTable(t, s, l.schema)
}

// checkSinkTable refuses a table this sink cannot write: a protocol it does
// not implement, or a schema other than want (the query's output's).
func checkSinkTable(t *Table, s *Snapshot, want Schema) error {
	if err := checkWriteProtocol(s.Protocol, t.logDir); err != nil {
		return err
	}
	if !sameShape(s.Schema, want) {
		return errcode.New(CodeSchemaMismatch, t.root, "point --table at an empty directory, or run the query that wrote this table",
			"the table's schema %s differs from the query's output schema %s", s.Metadata.SchemaString, want.String())
	}
	return nil
}

// sinkLayout is the table layout for rows of out, keyed by keyCols when
// given, else by out's key. The sink has no schema of its own: an empty out
// is refused.
func sinkLayout(out stream.Schema, keyCols []string, path string) (*outLayout, error) {
	if len(out.Fields) == 0 {
		return nil, errcode.New(CodeNoOutputSchema, path,
			"give the sink the schema of the rows it receives (SinkOptions.Schema), or run it under an operator that declares its output (stream.SchemaOperator)",
			"the Delta sink has no output schema: it creates and checks its table from the schema of the rows it receives, and none was given")
	}
	l, err := newOutLayout(out)
	if err != nil {
		return nil, err
	}
	if len(keyCols) > 0 {
		if err := l.setKey(keyCols); err != nil {
			return nil, errcode.Wrap(err, errcode.InvalidArgument, path, "name MERGE key columns of the output schema "+out.String(), "bad MERGE key columns")
		}
	}
	return l, nil
}
