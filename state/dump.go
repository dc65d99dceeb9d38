package state

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// DumpOptions configures Dump.
type DumpOptions struct {
	FS         vfs.FS // the checkpoint's FS (vfs.Default for a local path)
	Checkpoint string // the checkpoint directory
	Operator   int    // state/<Operator>
	// Batch selects the state as of batch Batch (the newest state version
	// ≤ Batch); -1 means the latest committed batch (commits/<id>).
	Batch  int64
	Format string // "csv" (default), "jsonl", or "statestore" (DumpSource)
	// Store is the store DumpSource prints (Spark's storeName; "" = the
	// default store, or the operator's only one).
	Store string
	// Columns is the preferred order of the key and value columns, e.g. the
	// query's output order (window_start before window_end, while the key
	// encodes window_end first for eviction). Names not in the schema are
	// ignored; fields it does not name follow in schema order.
	Columns []string
}

// timestampLayout renders Timestamp fields: RFC 3339, UTC, with the
// fraction of a second only when there is one (up to microseconds), as
// `ethstream table show` prints them.
const timestampLayout = "2006-01-02T15:04:05.999999Z07:00"

// Validate refuses a format or batch id Dump cannot take, looking at
// nothing else ("" is csv).
func (o DumpOptions) Validate() error {
	if o.Format != "" && o.Format != "csv" && o.Format != "jsonl" && o.Format != FormatStateStore {
		return errcode.New(errcode.InvalidArgument, "", "use --format csv, jsonl or statestore", "unknown format %q", o.Format)
	}
	if o.Store != "" && o.Format != FormatStateStore {
		return errcode.New(errcode.InvalidArgument, "", "add --format statestore, or drop --store", "--store %s needs --format statestore", o.Store)
	}
	if o.Batch < -1 {
		return errcode.New(errcode.InvalidArgument, "", "pass --batch N with N >= 0, or -1 for the latest committed batch",
			"--batch %d is not a batch id", o.Batch)
	}
	return nil
}

// Dump writes every row of one operator's state: a header row (key and
// value fields in the order of Columns, "partition" last), then one row per
// key in (partition, key) order. In jsonl each line is one row as a JSON
// object whose keys are those column names in that order (no header line).
// Timestamps are RFC 3339 UTC (timestampLayout). It returns the version dumped.
func Dump(ctx context.Context, o DumpOptions, w io.Writer) (int64, error) {
	if o.Format == "" {
		o.Format = "csv"
	}
	if err := o.Validate(); err != nil {
		return -1, err
	}
	if o.Format == FormatStateStore {
		return DumpSource(ctx, o, w)
	}
	dir, v, err := dumpVersion(o)
	if err != nil {
		return -1, err
	}
	info, err := Stat(o.FS, dir, v)
	if err != nil {
		return -1, err
	}
	order, header, types := dumpColumns(info.Schema, o.Columns)
	bw := bufio.NewWriterSize(w, 256<<10)
	var cw *csv.Writer
	if o.Format == "csv" {
		cw = csv.NewWriter(bw)
		if err := cw.Write(header); err != nil {
			return v, err
		}
	}
	var (
		rec  []string
		line []byte
		vals []any
	)
	var row []any
	_, err = ReadAll(ctx, o.FS, dir, v, renderValues(info.Schema, func(p int, key, val []any) error {
		row = append(append(row[:0], key...), val...)
		if len(row) != len(types) {
			return fmt.Errorf("state: row has %d values, schema %d", len(row), len(types))
		}
		vals = vals[:0]
		for _, i := range order {
			vals = append(vals, row[i])
		}
		if cw != nil {
			rec = rec[:0]
			for i, x := range vals {
				rec = append(rec, formatText(types[i], x))
			}
			rec = append(rec, strconv.Itoa(p))
			return cw.Write(rec)
		}
		line = append(line[:0], '{')
		for i, x := range vals {
			line = strconv.AppendQuote(line, header[i])
			line = append(line, ':')
			line = appendJSON(line, types[i], x)
			line = append(line, ',')
		}
		line = strconv.AppendQuote(line, "partition")
		line = append(line, ':')
		line = strconv.AppendInt(line, int64(p), 10)
		line = append(line, '}', '\n')
		_, err := bw.Write(line)
		return err
	}))
	if err != nil {
		return v, err
	}
	if cw != nil {
		cw.Flush()
		if err := cw.Error(); err != nil {
			return v, err
		}
	}
	return v, bw.Flush()
}

// dumpVersion resolves the state version Dump prints: the newest at or
// before the asked batch (default: the latest committed one) of the
// operator's state directory.
func dumpVersion(o DumpOptions) (string, int64, error) {
	if !(checkpoint.Dir{FS: o.FS, Path: o.Checkpoint}).Exists() {
		return "", -1, errcode.New(errcode.CheckpointNotFound, o.Checkpoint, "check --checkpoint: it names the directory a query ran on",
			"checkpoint directory %s does not exist", o.Checkpoint)
	}
	if err := (checkpoint.Dir{FS: o.FS, Path: o.Checkpoint}).CheckCopyComplete(); err != nil {
		return "", -1, err
	}
	dir := o.FS.PathJoin(o.Checkpoint, "state", strconv.Itoa(o.Operator))
	c, err := LatestCommittedBatch(o.FS, o.Checkpoint)
	if err != nil {
		return "", -1, err
	}
	if c < 0 {
		return "", -1, errcode.New(CodeStateNotFound, o.FS.PathJoin(o.Checkpoint, "commits"),
			"run the query until a batch commits", "the checkpoint has no committed batch")
	}
	limit := o.Batch
	if limit < 0 {
		limit = c
	} else if limit > c {
		// Past the commit log, only a state version written for exactly
		// that batch (a batch that will re-run) can be asked for: printing
		// an older one would pass it off as batch limit's state.
		newest, err := LatestVersionAtMost(o.FS, dir, math.MaxInt64)
		if err != nil {
			return "", -1, err
		}
		if limit > newest {
			return "", -1, errcode.New(CodeStateNotFound, o.FS.PathJoin(o.Checkpoint, "commits"),
				fmt.Sprintf("pass --batch from 0 to %d, or omit it for the latest committed batch", max(c, newest)),
				"batch %d has not run; the latest committed batch is %d", limit, c)
		}
	}
	v, err := LatestVersionAtMost(o.FS, dir, limit)
	if err != nil {
		return "", -1, err
	}
	if v < 0 {
		return "", -1, errcode.New(CodeStateNotFound, dir, "check --op and --batch",
			"no state version at or before batch %d", limit)
	}
	return dir, v, nil
}

// dumpColumns is the order of the schema's fields Dump prints (those
// named first), their header (with the partition last) and their types.
func dumpColumns(schema Schema, names []string) ([]int, []string, []stream.Type) {
	var (
		header []string
		types  []stream.Type
	)
	fields := append(append([]Field(nil), schema.Key...), schema.Value...)
	order := columnOrder(fields, names)
	for _, i := range order {
		header = append(header, fields[i].Name)
		types = append(types, fields[i].Type)
	}
	return order, append(header, "partition"), types
}

// columnOrder returns the indexes of fields in the order prefer names them,
// then the fields it does not name, in schema order.
func columnOrder(fields []Field, prefer []string) []int {
	var order []int
	used := make([]bool, len(fields))
	for _, name := range prefer {
		for i, f := range fields {
			if f.Name == name && !used[i] {
				order = append(order, i)
				used[i] = true
				break
			}
		}
	}
	for i := range fields {
		if !used[i] {
			order = append(order, i)
		}
	}
	return order
}

// typedValue turns a decoded field of a type that shares its class's
// encoding (a decimal's 16 bytes, a date's days) into its text.
func typedValue(t stream.Type, x any) (string, bool) {
	switch v := x.(type) {
	case string:
		if t.Kind() == stream.Decimal && len(v) == 16 {
			return stream.Dec128FromKey([]byte(v)).Text(t.Scale()), true
		}
	case int64:
		switch t {
		case stream.Date:
			return time.Unix(v*86400, 0).UTC().Format(time.DateOnly), true
		case stream.Boolean:
			return strconv.FormatBool(v != 0), true
		case stream.TimestampNTZ:
			return time.UnixMicro(v).UTC().Format("2006-01-02T15:04:05.000000"), true
		}
	}
	return "", false
}

func formatText(t stream.Type, x any) string {
	if s, ok := typedValue(t, x); ok {
		return s
	}
	switch v := x.(type) {
	case int64:
		if t == stream.Timestamp {
			return time.UnixMicro(v).UTC().Format(timestampLayout)
		}
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return v
	case nil:
		return "null" // a null group key
	}
	return fmt.Sprint(x)
}

func appendJSON(dst []byte, t stream.Type, x any) []byte {
	if s, ok := typedValue(t, x); ok {
		if t.Kind() == stream.Decimal || t == stream.Boolean {
			return append(dst, s...)
		}
		return strconv.AppendQuote(dst, s)
	}
	switch v := x.(type) {
	case int64:
		if t == stream.Timestamp {
			return strconv.AppendQuote(dst, time.UnixMicro(v).UTC().Format(timestampLayout))
		}
		return strconv.AppendInt(dst, v, 10)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return strconv.AppendQuote(dst, strconv.FormatFloat(v, 'g', -1, 64))
		}
		return strconv.AppendFloat(dst, v, 'g', -1, 64)
	}
	b, err := json.Marshal(x)
	if err != nil {
		return strconv.AppendQuote(dst, fmt.Sprint(x))
	}
	return append(dst, b...)
}

// LatestCommittedBatch returns the highest batch id N with a file
// <ckpt>/commits/N (decimal name), or -1 if there is none. A batch is
// committed iff that file exists (docs/contracts.md, Checkpoint).
func LatestCommittedBatch(fs vfs.FS, ckpt string) (int64, error) {
	ids, err := checkpoint.Dir{FS: fs, Path: ckpt}.ListCommits()
	if err != nil || len(ids) == 0 {
		return -1, err
	}
	return ids[len(ids)-1], nil
}
