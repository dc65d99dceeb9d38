package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sources/ddl"
	"github.com/ethstream/ethstream/sources/internal/pqcol"
	"github.com/ethstream/ethstream/stream"
)

// maxInferFiles bounds the files schema inference reads (Spark reads them
// all; a streaming start over a large directory would read it twice).
const maxInferFiles = 100

// infer infers the schema of the files present (spark.sql.streaming.
// schemaInference=true): Parquet from the first file's footer; CSV from
// the first line (names from the header, or _c0, _c1, ...; every column a
// string unless inferSchema=true); JSON from every line, fields sorted by
// name as Spark's JSON inference sorts them. Partition columns are added
// by resolveLayout. No file: Spark's UNABLE_TO_INFER_SCHEMA.
func (s *Source) infer(ctx context.Context, objs []listed, d discovered) (ddl.Schema, error) {
	if len(objs) == 0 {
		return ddl.Schema{}, errcode.New(CodeSchemaRequired, s.st.root(),
			"pass schema= in Spark's DDL form, or start once files exist",
			"unable to infer schema for %s at %s: it has no files; the schema must be specified manually", strings.ToUpper(s.opts.Format), s.st.root())
	}
	n := min(len(objs), maxInferFiles)
	if s.opts.Format == Parquet {
		n = 1
	}
	inf := newInferrer(&s.opts)
	for _, o := range objs[:n] {
		data, err := s.st.read(ctx, o.URI, o.Size)
		if err != nil {
			return ddl.Schema{}, errcode.Wrap(err, CodeFailedReadFile, o.URI, "restore the file, or pass schema=", "read %s to infer the schema", o.URI)
		}
		if err := inf.add(data, o.URI); err != nil {
			return ddl.Schema{}, err
		}
	}
	out, err := inf.schema()
	if err != nil {
		return ddl.Schema{}, err
	}
	// A partition column found in the files too is the partition's (Spark
	// drops the data column of the same name).
	kept := out.Fields[:0]
	for _, f := range out.Fields {
		dup := false
		for _, p := range d.names {
			dup = dup || strings.EqualFold(p, f.Name)
		}
		if !dup {
			kept = append(kept, f)
		}
	}
	out.Fields = kept
	return out, nil
}

// inferrer accumulates what the files say about the schema.
type inferrer struct {
	o      *Options
	names  []string
	kinds  map[string]ddl.Kind // 0: only nulls seen
	parq   []stream.Field
	csvSet bool
}

func newInferrer(o *Options) *inferrer { return &inferrer{o: o, kinds: map[string]ddl.Kind{}} }

func (in *inferrer) add(data []byte, uri string) error {
	switch in.o.Format {
	case Parquet:
		fs, err := pqcol.Schema(bytes.NewReader(data), int64(len(data)))
		var ue *pqcol.UnsupportedError
		if errors.As(err, &ue) {
			return unsupportedType(Parquet, ue.Column, ue.Spark)
		}
		if err != nil {
			return errcode.Wrap(err, CodeFailedReadFile, uri, "replace the file, or pass schema=", "cannot read the parquet footer of %s", uri)
		}
		in.parq = fs
	case CSV:
		in.addCSV(data)
	default:
		in.addJSON(data)
	}
	return nil
}

func (in *inferrer) see(name string, k ddl.Kind) {
	prev, ok := in.kinds[name]
	if !ok {
		in.names = append(in.names, name)
	}
	switch {
	case k == 0:
		if !ok {
			in.kinds[name] = 0
		}
	case prev == 0:
		in.kinds[name] = k
	default:
		in.kinds[name] = widerInferred(prev, k)
	}
}

// widerInferred merges two inferred types as Spark's TypeCoercion does for
// CSV and JSON inference: numbers widen (int, bigint, decimal, double),
// anything else that differs is a string.
func widerInferred(a, b ddl.Kind) ddl.Kind {
	if a == b {
		return a
	}
	return widerPartitionType(a, b)
}

func (in *inferrer) addCSV(data []byte) {
	lines := bytes.Split(data, []byte{'\n'})
	first := true
	var fields []string
	var quoted []bool
	for _, line := range lines {
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) == 0 {
			continue
		}
		var err error
		fields, quoted, err = splitCSV(string(line), in.o.Sep, in.o.Quote, in.o.Escape, fields, quoted)
		if err != nil {
			continue
		}
		if first {
			first = false
			if !in.csvSet {
				in.csvSet = true
				for i, f := range fields {
					name := "_c" + strconv.Itoa(i)
					if in.o.Header && f != "" {
						name = f
					}
					in.see(name, 0)
				}
			}
			if in.o.Header {
				continue
			}
		}
		if !in.o.InferCSVTypes {
			continue
		}
		for i, f := range fields {
			if i >= len(in.names) || (!quoted[i] && f == in.o.NullValue) {
				continue
			}
			in.see(in.names[i], inferText(f, in.o))
		}
	}
}

// inferText is the type Spark's CSVInferSchema gives one field: int,
// bigint, decimal, double, timestamp, boolean, else string.
func inferText(f string, o *Options) ddl.Kind {
	if _, err := strconv.ParseInt(f, 10, 32); err == nil {
		return ddl.Int
	}
	if _, err := strconv.ParseInt(f, 10, 64); err == nil {
		return ddl.Long
	}
	if isInteger(f) {
		return ddl.Decimal
	}
	if _, ok := parseDouble(f); ok {
		return ddl.Double
	}
	if strings.EqualFold(f, "true") || strings.EqualFold(f, "false") {
		return ddl.Boolean
	}
	ts := false
	if o.TimestampFormat != "" {
		p, _ := compilePattern(o.TimestampFormat)
		_, ts = p.parse(f)
	} else {
		_, ts = parseDefaultTimestamp(f)
	}
	if ts {
		return ddl.Timestamp
	}
	return ddl.String
}

func (in *inferrer) addJSON(data []byte) {
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(line, &obj) != nil {
			continue // a malformed line adds nothing (Spark's PERMISSIVE inference)
		}
		for k, raw := range obj {
			in.see(k, inferJSON(raw))
		}
	}
}

// inferJSON is the type Spark's JsonInferSchema gives a value
// (prefersDecimal and inferTimestamp off): integers bigint (decimal beyond
// it), other numbers double, strings string, booleans boolean, objects and
// arrays struct and array, null nothing.
func inferJSON(raw json.RawMessage) ddl.Kind {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0
	}
	switch c := raw[0]; {
	case c == '"':
		return ddl.String
	case c == 't' || c == 'f':
		return ddl.Boolean
	case c == '{':
		return ddl.Struct
	case c == '[':
		return ddl.Array
	}
	s := string(raw)
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ddl.Long
	}
	if isInteger(s) {
		return ddl.Decimal
	}
	return ddl.Double
}

func (in *inferrer) schema() (ddl.Schema, error) {
	var out ddl.Schema
	if in.o.Format == Parquet {
		for _, f := range in.parq {
			out.Fields = append(out.Fields, ddl.Field{Name: f.Name, Type: ddl.FromStream(f.Type), Nullable: true})
		}
		return out, nil
	}
	names := in.names
	if in.o.Format == JSON {
		names = append([]string(nil), names...)
		sort.Strings(names)
	}
	for _, n := range names {
		k := in.kinds[n]
		switch k {
		case 0:
			k = ddl.String
		case ddl.Int:
			if in.o.Format == JSON {
				k = ddl.Long
			}
		}
		t := ddl.Type{Kind: k}
		if k == ddl.Decimal {
			t.Precision = 38
		}
		if _, ok := ddl.StreamType(t); !ok {
			return out, errcode.New(ddl.UnsupportedForSource, "",
				fmt.Sprintf("pass schema= in Spark's DDL form with a supported type for %s (e.g. STRING), or leave the column out", n),
				"the %s source's column `%s` is inferred as %s, which the engine cannot hold yet", in.o.Format, n, strings.ToUpper(t.String()))
		}
		out.Fields = append(out.Fields, ddl.Field{Name: n, Type: t, Nullable: true})
	}
	if len(out.Fields) == 0 {
		return out, errcode.New(CodeSchemaRequired, "", "pass schema= in Spark's DDL form", "unable to infer schema for %s: the files hold no columns", strings.ToUpper(in.o.Format))
	}
	return out, nil
}
