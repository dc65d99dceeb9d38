package state

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// writeSourceState commits one state version (batch 0) of schema with
// rows in p partitions under ckpt/state/<op> of fs, and commits/0.
func writeSourceState(t *testing.T, fs vfs.FS, op int, p int, schema Schema, rows [][2][]any) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: fmt.Sprintf("ckpt/state/%d", op), FS: fs, LocalDir: t.TempDir(), Partitions: p, Schema: schema}, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := s.Put(s.EncodeKey(nil, r[0]...), s.EncodeValue(nil, r[1]...)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll("ckpt/commits", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("ckpt/commits/0", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
}

// TestDumpStateStore: --format statestore prints the rows of Spark's state
// data source, key and value as structs of the recorded fields and the
// partition as partition_id, for an aggregation (operator 1) and a
// dropDuplicatesWithinWatermark (operator 0) alike; --store names the
// default store or is refused naming the stores there are.
func TestDumpStateStore(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	exp := time.Date(2026, 9, 28, 3, 30, 0, 0, time.UTC)
	dd := Schema{OperatorName: "dedupeWithinWatermark", Key: []Field{{Name: "hash", Type: stream.String}},
		Value: []Field{{Name: "expiresAtMicros", Type: stream.Timestamp}}, Spec: "format=1"}
	writeSourceState(t, fs, 0, 1, dd, [][2][]any{{{"0xaa"}, {exp}}, {{"0xbb"}, {exp.Add(time.Hour)}}})
	ag := Schema{OperatorName: "aggregate", Key: []Field{{Name: "miner", Type: stream.String}}, Value: []Field{{Name: "count", Type: stream.Int64}}}
	writeSourceState(t, fs, 1, 1, ag, [][2][]any{{{"0xm"}, {int64(7)}}})
	dump := func(op int, store string) (string, error) {
		var b bytes.Buffer
		_, err := Dump(ctx, DumpOptions{FS: fs, Checkpoint: "ckpt", Operator: op, Batch: -1, Format: FormatStateStore, Store: store}, &b)
		return b.String(), err
	}
	got, err := dump(0, "")
	want := `{"key":{"hash":"0xaa"},"value":{"expiresAtMicros":"2026-09-28T03:30:00Z"},"partition_id":0}` + "\n" +
		`{"key":{"hash":"0xbb"},"value":{"expiresAtMicros":"2026-09-28T04:30:00Z"},"partition_id":0}` + "\n"
	if err != nil || got != want {
		t.Fatalf("dedup: %v\n%s\nwant\n%s", err, got, want)
	}
	if got, err := dump(1, DefaultStore); err != nil || got != `{"key":{"miner":"0xm"},"value":{"count":7},"partition_id":0}`+"\n" {
		t.Fatalf("aggregation: %v %q", err, got)
	}
	if _, err := dump(1, "left-keyToNumValues"); errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "default") {
		t.Fatalf("unknown store: %v", err)
	}
	var b bytes.Buffer
	if _, err := Dump(ctx, DumpOptions{FS: fs, Checkpoint: "ckpt", Batch: -1, Format: "csv", Store: "default"}, &b); errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("--store without statestore: %v", err)
	}
}

// splitLayout is a StoreLayout of two stores over one recorded state, as
// a stream-stream join's (one per side): the rows whose key starts with
// "l" are store "left", the others "right"; the value has one field less
// in the right store, so each store renders its own structs.
func splitLayout(fs vfs.FS, dir string, v int64, info VersionInfo) ([]SourceStore, error) {
	d := defaultStore{fs: fs, dir: dir, v: v, schema: info.Schema}
	return []SourceStore{sideStore{d, "left"}, sideStore{d, "right"}}, nil
}

type sideStore struct {
	defaultStore
	side string
}

func (s sideStore) Name() string { return s.side }
func (s sideStore) ValueFields() []Field {
	if s.side == "right" {
		return s.schema.Value[:1]
	}
	return s.schema.Value
}
func (s sideStore) Rows(ctx context.Context, fn func(SourceRow) error) error {
	return s.defaultStore.Rows(ctx, func(r SourceRow) error {
		if strings.HasPrefix(r.Key[0].(string), "l") != (s.side == "left") {
			return nil
		}
		if s.side == "right" {
			r.Value = r.Value[:1]
		}
		return fn(r)
	})
}

// TestDumpStateStoreLayout: an operator whose state spans several stores
// plugs in by registering a StoreLayout for its operator name: --store
// picks one, and without --store (no "default" store, more than one) the
// dump is refused naming them.
func TestDumpStateStoreLayout(t *testing.T) {
	RegisterStoreLayout("testSplit", splitLayout)
	ctx := context.Background()
	fs := vfs.NewMem()
	sc := Schema{OperatorName: "testSplit", Key: []Field{{Name: "k", Type: stream.String}},
		Value: []Field{{Name: "n", Type: stream.Int64}, {Name: "matched", Type: stream.Int64}}}
	writeSourceState(t, fs, 0, 1, sc, [][2][]any{{{"l1"}, {int64(1), int64(0)}}, {{"r1"}, {int64(2), int64(1)}}})
	dump := func(store string) (string, error) {
		var b bytes.Buffer
		_, err := Dump(ctx, DumpOptions{FS: fs, Checkpoint: "ckpt", Batch: -1, Format: FormatStateStore, Store: store}, &b)
		return b.String(), err
	}
	if got, err := dump("right"); err != nil || got != `{"key":{"k":"r1"},"value":{"n":2},"partition_id":0}`+"\n" {
		t.Fatalf("right: %v %q", err, got)
	}
	if got, err := dump("left"); err != nil || got != `{"key":{"k":"l1"},"value":{"n":1,"matched":0},"partition_id":0}`+"\n" {
		t.Fatalf("left: %v %q", err, got)
	}
	if _, err := dump(""); errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "left, right") {
		t.Fatalf("no store named: %v", err)
	}
}
