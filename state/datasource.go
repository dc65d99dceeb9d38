package state

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// Spark's state data source (spark.read.format("statestore"), the
// structured-streaming-state-data-source guide) reads one store of one
// stateful operator as rows of three columns: key (a struct of the key
// fields), value (a struct of the value fields) and partition_id, with the
// options operatorId, batchId and storeName (and joinSide for a join).
// DumpSource prints the same rows from a checkpoint, as JSON lines:
//
//	{"key":{"hash":"0x1f…"},"value":{"expiresAtMicros":"2026-09-28T03:30:00Z"},"partition_id":3}
//
// An operator's recorded state renders itself: a StoreLayout registered
// for its state schema's operator name (RegisterStoreLayout) lists its
// stores and reads their rows, so an operator whose state spans several
// stores (a stream-stream join's keyToNumValues and keyWithIndexToValue
// per side) plugs in without this file knowing it. Every other operator
// (the aggregation, the deduplications) is one store, "default" as in
// Spark, whose rows are the state's key and value fields.

// FormatStateStore is the Dump format of the state data source's rows
// (DumpSource), named after Spark's format("statestore").
const FormatStateStore = "statestore"

// DefaultStore is the store name of an operator with one store (Spark's
// StateStoreId.DEFAULT_STORE_NAME).
const DefaultStore = "default"

// SourceRow is one row of the state data source: the partition, and the
// key and value structs' field values in the store's field order.
type SourceRow struct {
	PartitionID int
	Key, Value  []any
}

// SourceStore is one store of an operator's recorded state.
type SourceStore interface {
	// Name is Spark's storeName ("default" for an operator with one).
	Name() string
	// KeyFields and ValueFields are the fields of the key and value structs.
	KeyFields() []Field
	ValueFields() []Field
	// Rows calls fn for every row in (partition, key) order.
	Rows(ctx context.Context, fn func(SourceRow) error) error
}

// StoreLayout opens the stores of the state version v in dir, whose
// recorded schema is info.Schema.
type StoreLayout func(fs vfs.FS, dir string, v int64, info VersionInfo) ([]SourceStore, error)

var layouts struct {
	sync.Mutex
	byOperator map[string]StoreLayout
}

// RegisterStoreLayout makes l render the state of every operator whose
// recorded state schema has operatorName (state.Schema.OperatorName). Call
// it from an init function of the operator's package. Registering a name
// twice panics.
func RegisterStoreLayout(operatorName string, l StoreLayout) {
	layouts.Lock()
	defer layouts.Unlock()
	if layouts.byOperator == nil {
		layouts.byOperator = map[string]StoreLayout{}
	}
	if _, dup := layouts.byOperator[operatorName]; dup {
		panic("state: store layout of operator " + operatorName + " registered twice")
	}
	layouts.byOperator[operatorName] = l
}

// Stores opens the stores of state version v in dir: the registered layout
// of its operator, else the one default store.
func Stores(fs vfs.FS, dir string, v int64) ([]SourceStore, error) {
	info, err := Stat(fs, dir, v)
	if err != nil {
		return nil, err
	}
	layouts.Lock()
	l := layouts.byOperator[info.Schema.OperatorName]
	layouts.Unlock()
	if l != nil {
		return l(fs, dir, v, info)
	}
	return []SourceStore{defaultStore{fs: fs, dir: dir, v: v, schema: info.Schema}}, nil
}

// defaultStore is the one store of an operator's state: its key and value
// fields as recorded.
type defaultStore struct {
	fs     vfs.FS
	dir    string
	v      int64
	schema Schema
}

func (s defaultStore) Name() string         { return DefaultStore }
func (s defaultStore) KeyFields() []Field   { return s.schema.Key }
func (s defaultStore) ValueFields() []Field { return s.schema.Value }

func (s defaultStore) Rows(ctx context.Context, fn func(SourceRow) error) error {
	_, err := ReadAll(ctx, s.fs, s.dir, s.v, renderValues(s.schema, func(p int, key, val []any) error {
		return fn(SourceRow{PartitionID: p, Key: key, Value: val})
	}))
	return err
}

// DumpSource writes the rows of one store (o.Store; "" = the default, or
// the operator's only store) of the state Dump would print, as the state
// data source reads them: one JSON object per line with key, value and
// partition_id (timestamps as Dump renders them). It returns the version
// dumped.
func DumpSource(ctx context.Context, o DumpOptions, w io.Writer) (int64, error) {
	dir, v, err := dumpVersion(o)
	if err != nil {
		return -1, err
	}
	stores, err := Stores(o.FS, dir, v)
	if err != nil {
		return v, err
	}
	st, err := pickStore(stores, o.Store, dir)
	if err != nil {
		return v, err
	}
	kf, vf := st.KeyFields(), st.ValueFields()
	bw := bufio.NewWriterSize(w, 256<<10)
	var line []byte
	err = st.Rows(ctx, func(r SourceRow) error {
		if len(r.Key) != len(kf) || len(r.Value) != len(vf) {
			return fmt.Errorf("state: store %s row has %d key and %d value fields, schema %d and %d", st.Name(), len(r.Key), len(r.Value), len(kf), len(vf))
		}
		line = append(line[:0], `{"key":`...)
		line = appendStruct(line, kf, r.Key)
		line = append(line, `,"value":`...)
		line = appendStruct(line, vf, r.Value)
		line = append(line, `,"partition_id":`...)
		line = strconv.AppendInt(line, int64(r.PartitionID), 10)
		line = append(line, '}', '\n')
		_, err := bw.Write(line)
		return err
	})
	if err != nil {
		return v, err
	}
	return v, bw.Flush()
}

// pickStore finds the store named name among stores ("": the default
// store, or the only one).
func pickStore(stores []SourceStore, name, dir string) (SourceStore, error) {
	names := make([]string, len(stores))
	for i, s := range stores {
		names[i] = s.Name()
		if s.Name() == name || name == "" && (len(stores) == 1 || s.Name() == DefaultStore) {
			return s, nil
		}
	}
	return nil, errcode.New(errcode.InvalidArgument, dir, "pass --store "+strings.Join(names, " or --store "),
		"the operator has no store %q: its stores are %s", orDefault(name), strings.Join(slices.Clone(names), ", "))
}

func orDefault(name string) string {
	if name == "" {
		return DefaultStore
	}
	return name
}

// appendStruct appends the JSON object of one struct's fields.
func appendStruct(dst []byte, fields []Field, vals []any) []byte {
	dst = append(dst, '{')
	for i, f := range fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, f.Name)
		dst = append(dst, ':')
		dst = appendJSON(dst, f.Type, vals[i])
	}
	return append(dst, '}')
}
