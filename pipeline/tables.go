package pipeline

import (
	"net/url"
	"path"
	"strings"

	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/sources/s3archive"
	"github.com/ethstream/ethstream/stream"
)

// The Ethereum tables a block source can read besides blocks: the
// s3archive source reads the table its location names (the last element
// of .../v1.0/eth/transactions), the ethrpc source the one its table=
// option names; anything else is the blocks table (package ethblock).

// archiveTable is the table an s3archive location names: its last path
// element when that is a table of package ethtables, otherwise blocks ("").
func archiveTable(uri string) string {
	loc, _, _ := strings.Cut(uri, "?")
	u, err := url.Parse(loc)
	if err != nil {
		return ""
	}
	t := path.Base(strings.TrimSuffix(u.Path, "/"))
	if _, ok := ethtables.Columns(t); ok {
		return t
	}
	return ""
}

// rpcTable is the table an ethrpc URI's table= option names, "" for
// blocks (ethrpc.ParseURI validates the option).
func rpcTable(uri string) string {
	_, q, _ := strings.Cut(strings.TrimPrefix(uri, "ethrpc:"), "?")
	v, err := url.ParseQuery(q)
	if err != nil {
		return ""
	}
	if t := v.Get("table"); t != "blocks" {
		return t
	}
	return ""
}

// specTable is the table a block source's spec reads, "" for blocks.
func specTable(spec SourceSpec) string {
	switch spec.Format {
	case "s3archive":
		return archiveTable(spec.URI)
	case "ethrpc":
		return rpcTable(spec.URI)
	}
	return ""
}

// TableArchiveColumns is a table's schema as an s3archive source reads it
// (package ethtables): the files' names, every non-null column required.
func TableArchiveColumns(table string) []s3archive.Column {
	cols, _ := ethtables.Columns(table)
	out := make([]s3archive.Column, len(cols))
	for i, c := range cols {
		out[i] = s3archive.Column{Name: c.Name, Type: c.Type, Nullable: c.Nullable, Required: !c.Nullable}
	}
	return out
}

// tableSchema is the engine schema of a table the spec names, false for
// blocks.
func tableSchema(spec SourceSpec) (stream.Schema, bool) {
	t := specTable(spec)
	if t == "" {
		return stream.Schema{}, false
	}
	if _, ok := ethtables.Columns(t); !ok {
		return stream.Schema{}, false
	}
	return ethtables.StreamSchema(t), true
}
