package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/dedup"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
	"github.com/spf13/pflag"
)

// TestStateDumpStateStoreFormat: `state dump DIR --op 1 --format
// statestore` prints a deduplication's state (operator 1 here) as the rows
// of Spark's state data source: key, value, partition_id.
func TestStateDumpStateStoreFormat(t *testing.T) {
	ctx := context.Background()
	ckpt := t.TempDir()
	op, err := dedup.New(dedup.Spec{Columns: []string{"hash"}, Input: stream.Schema{Fields: []stream.Field{{Name: "hash", Type: stream.String}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := state.Open(ctx, state.Options{Dir: filepath.Join(ckpt, "state", "1"), FS: vfs.Default, LocalDir: t.TempDir(),
		Partitions: 1, Schema: op.Schema()}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(s.EncodeKey(nil, "0xab"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ckpt, "commits"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ckpt, "commits", "0"), []byte("v1\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The command tree is global: its flags keep the values of another
	// test's execute, and this one's must not leak into the next.
	dump, _, err := rootCmd.Find([]string{"state", "dump"})
	if err != nil {
		t.Fatal(err)
	}
	reset := func() {
		dump.Flags().VisitAll(func(f *pflag.Flag) { _ = f.Value.Set(f.DefValue); f.Changed = false })
	}
	reset()
	t.Cleanup(reset)
	var out, errOut bytes.Buffer
	if code := execute(ctx, []string{"state", "dump", ckpt, "--op", "1", "--format", "statestore"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if want := `{"key":{"hash":"0xab"},"value":{},"partition_id":0}` + "\n"; out.String() != want {
		t.Fatalf("dump %q, want %q", out.String(), want)
	}
}
