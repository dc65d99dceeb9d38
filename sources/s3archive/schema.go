package s3archive

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/stream"
)

// Column is one column the archive's files hold, as the source is
// configured to read it (Options.Columns): the source knows no column of
// its own; its caller declares the files' schema (for the blocks table,
// package ethblock's, wired by the pipeline).
type Column struct {
	// Name is the column's engine name, what queries read (block_ts).
	Name string
	// Type is its engine type; the decoder converts the file's physical
	// and logical types to it (docs: Parquet decoding, doc.go).
	Type stream.Type
	// Nullable columns may hold nulls (and may be missing from a file,
	// read as nulls); a non-nullable column is still read as nulls when
	// absent from a file unless Required.
	Nullable bool
	// File is the column's name in the Parquet files (timestamp for
	// block_ts); empty means Name. Matched case-insensitively, as Spark's
	// resolution is.
	File string
	// Required columns must exist in every file: a file without one is
	// ARCHIVE_FILE_UNREADABLE. Others a file may lack (a column the dataset
	// added later) and read as nulls.
	Required bool
	// Repeats marks a string column with few distinct values (a miner):
	// its plain-encoded values are interned across files, so that a
	// backfill does not allocate the same strings again per file.
	Repeats bool
}

// fileName is the column's name in the files.
func (c Column) fileName() string {
	if c.File != "" {
		return c.File
	}
	return c.Name
}

// schemaOf is the stream schema of cols.
func schemaOf(cols []Column) stream.Schema {
	s := stream.Schema{Fields: make([]stream.Field, len(cols))}
	for i, c := range cols {
		s.Fields[i] = stream.Field{Name: c.Name, Type: c.Type, Nullable: c.Nullable}
	}
	return s
}

// validColumns checks a configured schema: at least one column, names
// unique and never the engine's source column, known types.
func validColumns(cols []Column) error {
	if len(cols) == 0 {
		return errcode.New(errcode.InvalidArgument, "", "configure the columns the archive's files hold (Options.Columns)",
			"s3archive has no columns configured")
	}
	seen := map[string]bool{}
	for _, c := range cols {
		k := strings.ToLower(c.Name)
		switch {
		case c.Name == "" || c.Name == stream.ColSource || seen[k]:
			return errcode.New(errcode.InvalidArgument, "", "name each configured column once, never "+stream.ColSource,
				"s3archive column %q is empty, repeated or the engine's source column", c.Name)
		case c.Type.Kind() == stream.Array && (c.Type.Elem() < stream.Int64 || c.Type.Elem() > stream.Timestamp),
			c.Type.Kind() != stream.Array && (c.Type < stream.Int64 || c.Type > stream.Timestamp):
			return errcode.New(errcode.InvalidArgument, "", "use int64, float64, string or timestamp",
				"s3archive column %q has unknown type %v", c.Name, c.Type)
		}
		seen[k] = true
	}
	return nil
}

// projectColumns resolves a projection (nil: every column) against cols.
func projectColumns(cols []Column, names []string) ([]Column, error) {
	if names == nil {
		return slices.Clone(cols), nil
	}
	out := make([]Column, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(cols, func(c Column) bool { return c.Name == n })
		if i < 0 {
			all := make([]string, len(cols))
			for j, c := range cols {
				all[j] = c.Name
			}
			return nil, errcode.New(errcode.InvalidArgument, "", "project only the source's columns "+strings.Join(all, ", "),
				"s3archive cannot produce column %q", n)
		}
		out = append(out, cols[i])
	}
	return out, nil
}

// String renders a column for errors.
func (c Column) String() string { return fmt.Sprintf("%s %v", c.Name, c.Type) }

// checkFileSchema reads the footer of the object at uri and checks it
// against cols, as a decode would (newColDecoder): every Required column
// is there, and every configured column the file holds reads as its type.
// It reads no column data.
func checkFileSchema(ctx context.Context, st store, uri string, size int64, cols []Column, m *metrics) (err error) {
	obj, err := st.open(ctx, uri)
	if err != nil {
		return readErr(ctx, err, uri, "open archive object")
	}
	rr := &rangeReader{ctx: ctx, obj: obj, uri: uri, size: size, shape: st.readShape(), m: m}
	defer func() {
		if cerr := obj.close(); cerr != nil && err == nil {
			err = readErr(ctx, cerr, uri, "close archive object")
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			err = unreadable(fmt.Errorf("parquet decoder panic: %v", r), uri, "decode parquet file")
		}
	}()
	f, _, err := openFooter(ctx, rr)
	if err != nil {
		return err
	}
	if _, err := columnar.Open(f, fieldsOf(cols), map[string]string{}); err != nil {
		e := unreadable(err, uri, "the file does not hold the source's columns (%s)", schemaOf(cols))
		e.Remedy = "point the source at files of its schema (for --source NAME=s3archive:URI, the blocks table's)"
		return e
	}
	return nil
}
