package files

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sources/internal/pqcol"
	"github.com/ethstream/ethstream/stream"
)

// CodeMalformedRecord is Spark's error class of a malformed record under
// mode FAILFAST (MALFORMED_RECORD_IN_PARSING).
const CodeMalformedRecord = "MALFORMED_RECORD_IN_PARSING"

// chunkRows is how many rows of a text file go into one batch.
const chunkRows = 4096

// reader decodes files into batches of the projected columns. It is
// immutable after newReader but for its scratch slices: one per worker.
type reader struct {
	o         *Options
	l         *layout
	proj      []int // layout indices, output order
	tsPattern pattern

	// scratch
	fields []string
	quoted []bool
	row    []cell
}

func newReader(o *Options, l *layout, proj []int) *reader {
	r := &reader{o: o, l: l, proj: proj, row: make([]cell, len(l.cols))}
	if o.TimestampFormat != "" {
		r.tsPattern, _ = compilePattern(o.TimestampFormat) // checked by ParseURI
	}
	return r
}

// batchBuilder accumulates rows of the projected columns.
type batchBuilder struct {
	r   *reader
	b   *stream.Batch
	out []*stream.Batch
}

func (bb *batchBuilder) start() {
	b := &stream.Batch{Columns: make([]stream.Column, len(bb.r.proj))}
	for i, li := range bb.r.proj {
		c := bb.r.l.cols[li]
		b.Columns[i] = stream.Column{Name: c.name, Type: c.typ}
	}
	bb.b = b
}

// add appends the row's projected cells.
func (bb *batchBuilder) add(row []cell) {
	if bb.b == nil {
		bb.start()
	}
	b := bb.b
	for i, li := range bb.r.proj {
		col := &b.Columns[i]
		v := row[li]
		if v.null && col.Valid == nil {
			col.Valid = make([]bool, b.Len, max(b.Len+1, chunkRows))
			for k := range col.Valid {
				col.Valid[k] = true
			}
		}
		if col.Valid != nil {
			col.Valid = append(col.Valid, !v.null)
		}
		switch col.Type.Storage() {
		case stream.Float64:
			col.Float64s = append(col.Float64s, v.f)
		case stream.String:
			col.Strings = append(col.Strings, v.s)
		case stream.Decimal:
			col.Decimals = append(col.Decimals, v.d)
		default:
			col.Int64s = append(col.Int64s, v.i)
		}
	}
	b.Len++
	if b.Len == chunkRows {
		bb.flush()
	}
}

func (bb *batchBuilder) flush() {
	if bb.b != nil && bb.b.Len > 0 {
		bb.out = append(bb.out, bb.b)
	}
	bb.b = nil
}

// partitionCells converts the file's partition values (rel: its path below
// the root) to the partition columns' types; a value that does not convert
// is null, as Spark casts it.
func (r *reader) partitionCells(rel string) []cell {
	ps := parsePartitions(rel)
	out := make([]cell, len(r.l.parts))
	for i := range out {
		out[i] = nullCell
	}
	if len(ps) != len(r.l.parts) {
		return out // a file under another layout: nulls (recursiveFileLookup, or a layout added later)
	}
	for _, c := range r.l.cols {
		if c.role != partitionCol || ps[c.pos].null {
			continue
		}
		if v, ok := r.textCell(&c, ps[c.pos].value); ok {
			out[c.pos] = v
		}
	}
	return out
}

// decode turns one file's bytes into batches. uri names the file in
// errors; rel is its path below the root.
func (r *reader) decode(data []byte, uri, rel string) ([]*stream.Batch, error) {
	parts := r.partitionCells(rel)
	switch r.o.Format {
	case Parquet:
		return r.decodeParquet(data, uri, parts)
	case CSV:
		return r.decodeText(data, uri, parts, r.csvRecord)
	}
	return r.decodeText(data, uri, parts, r.jsonRecord)
}

// decodeParquet reads the projected data columns with the Parquet decoder
// and adds the partition columns as constants.
func (r *reader) decodeParquet(data []byte, uri string, parts []cell) ([]*stream.Batch, error) {
	var cols []pqcol.Column
	for _, li := range r.proj {
		if c := r.l.cols[li]; c.role == dataCol {
			cols = append(cols, pqcol.Column{Name: c.name, Type: c.typ})
		}
	}
	bs, err := pqcol.Decode(bytes.NewReader(data), int64(len(data)), cols)
	if err != nil {
		return nil, errcode.Wrap(err, CodeFailedReadFile, uri, "replace the file with a complete Parquet file whose columns match the schema, then restart: the batch re-runs",
			"cannot read the parquet file %s", uri)
	}
	for _, b := range bs {
		out := make([]stream.Column, len(r.proj))
		k := 0
		for i, li := range r.proj {
			c := r.l.cols[li]
			if c.role == dataCol {
				out[i] = b.Columns[k]
				out[i].Name = c.name
				k++
				continue
			}
			out[i] = constColumn(c, parts[c.pos], b.Len)
		}
		b.Columns = out
	}
	return bs, nil
}

func constColumn(c column, v cell, n int) stream.Column {
	col := stream.Column{Name: c.name, Type: c.typ}
	if v.null {
		col.Valid = make([]bool, n)
	}
	switch c.typ.Storage() {
	case stream.Decimal:
		col.Decimals = make([]stream.Dec128, n)
		for i := range col.Decimals {
			col.Decimals[i] = v.d
		}
	case stream.Float64:
		col.Float64s = make([]float64, n)
		for i := range col.Float64s {
			col.Float64s[i] = v.f
		}
	case stream.String:
		col.Strings = make([]string, n)
		for i := range col.Strings {
			col.Strings[i] = v.s
		}
	default:
		col.Int64s = make([]int64, n)
		for i := range col.Int64s {
			col.Int64s[i] = v.i
		}
	}
	return col
}

// recordFunc fills r.row's data columns from one line; malformed says
// the record is malformed (the row holds what parsed, nulls elsewhere);
// skip says the line holds no record.
type recordFunc func(line []byte, first bool) (malformed, skip bool)

// decodeText splits a CSV or JSON-lines file into lines and applies the
// parse mode to each record: PERMISSIVE keeps a malformed record's partial
// row (with its text in the corrupt-record column, if any), DROPMALFORMED
// drops it, FAILFAST fails the batch naming the file and line.
func (r *reader) decodeText(data []byte, uri string, parts []cell, record recordFunc) ([]*stream.Batch, error) {
	bb := &batchBuilder{r: r}
	lineNo := 0
	first := true
	for len(data) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		for i := range r.row {
			r.row[i] = nullCell
		}
		wasFirst := first
		if len(line) > 0 {
			first = false
		}
		malformed, skip := record(line, wasFirst)
		if skip {
			continue
		}
		if malformed {
			switch r.o.Mode {
			case DropMalformed:
				continue
			case FailFast:
				return nil, errcode.New(CodeMalformedRecord, uri,
					"fix or remove the record and restart (the batch re-runs), or set mode=PERMISSIVE (nulls and the corrupt-record column) or mode=DROPMALFORMED",
					"malformed records are detected in record parsing of %s at line %d: %s. Parse Mode: FAILFAST", uri, lineNo, strconv.Quote(truncate(string(line), 200)))
			}
			if r.l.corrupt >= 0 {
				r.row[r.l.corrupt] = cell{s: string(line)}
			}
		}
		for _, c := range r.l.cols {
			if c.role == partitionCol {
				r.row[r.l.index(c.name)] = parts[c.pos]
			}
		}
		bb.add(r.row)
	}
	bb.flush()
	return bb.out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// projected reports whether layout column li is read.
func (r *reader) projected(li int) bool {
	for _, p := range r.proj {
		if p == li {
			return true
		}
	}
	return false
}

// csvRecord parses one CSV line: an empty line holds no record, nor does
// the first line of a file with header=true. A line whose field count is
// not the data columns' count is malformed (Spark's "Malformed CSV
// record"), its fields converted as far as they go; a field that does not
// convert to its column's type is malformed and null. Only projected
// columns are converted, as Spark's CSV column pruning does.
func (r *reader) csvRecord(line []byte, first bool) (malformed, skip bool) {
	if len(line) == 0 || first && r.o.Header {
		return false, true
	}
	var err error
	r.fields, r.quoted, err = splitCSV(string(line), r.o.Sep, r.o.Quote, r.o.Escape, r.fields, r.quoted)
	if err != nil {
		return true, false
	}
	malformed = len(r.fields) != r.l.nData
	for li := range r.l.cols {
		c := &r.l.cols[li]
		if c.role != dataCol || !r.projected(li) || c.pos >= len(r.fields) {
			continue
		}
		f := r.fields[c.pos]
		if !r.quoted[c.pos] && f == r.o.NullValue {
			continue
		}
		v, ok := r.textCell(c, f)
		if !ok {
			malformed = true
			continue
		}
		r.row[li] = v
	}
	return malformed, false
}

// jsonRecord parses one JSON line: a blank line holds no record; anything
// but one JSON object (and nothing after it) is malformed; fields are
// matched to columns by exact name (the last of duplicate keys wins); a
// value that does not convert to its column's type is malformed and null.
func (r *reader) jsonRecord(line []byte, _ bool) (malformed, skip bool) {
	if len(bytes.TrimSpace(line)) == 0 {
		return false, true
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return true, false
	}
	if len(bytes.TrimSpace(line[dec.InputOffset():])) > 0 {
		return true, false // something after the object
	}
	for li := range r.l.cols {
		c := &r.l.cols[li]
		if c.role != dataCol || !r.projected(li) {
			continue
		}
		raw, ok := obj[c.name]
		if !ok {
			continue
		}
		v, ok := r.jsonCell(c, raw)
		if !ok {
			malformed = true
			continue
		}
		r.row[li] = v
	}
	return malformed, false
}
