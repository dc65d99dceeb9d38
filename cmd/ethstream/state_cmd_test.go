package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

func TestStateDumpCommand(t *testing.T) {
	ctx := context.Background()
	ckpt := t.TempDir()
	schema := state.Schema{
		OperatorName: "aggregate",
		Key:          []state.Field{{Name: "window_end", Type: stream.Timestamp}, {Name: "miner", Type: stream.String}},
		Value:        []state.Field{{Name: "count", Type: stream.Int64}},
	}
	s, err := state.Open(ctx, state.Options{
		Dir: filepath.Join(ckpt, "state", "0"), FS: vfs.Default, LocalDir: t.TempDir(),
		Partitions: 1, Schema: schema,
	}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(s.EncodeKey(nil, int64(1_700_000_000_123_456), "0xab"), s.EncodeValue(nil, int64(42))); err != nil {
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
	var out, errOut bytes.Buffer
	if code := execute(ctx, []string{"state", "dump", "--checkpoint", ckpt}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := "window_end,miner,count,partition\n2023-11-14T22:13:20.123456Z,0xab,42,0\n"
	if out.String() != want {
		t.Fatalf("dump:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	errOut.Reset()
	if code := execute(ctx, []string{"state", "dump", "--checkpoint", ckpt, "--batch", "0", "--format", "jsonl"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if want := `{"window_end":"2023-11-14T22:13:20.123456Z","miner":"0xab","count":42,"partition":0}` + "\n"; out.String() != want {
		t.Fatalf("jsonl dump %q, want %q", out.String(), want)
	}
	errOut.Reset()
	if code := execute(ctx, []string{"state", "dump", "--checkpoint", ckpt, "--op", "3"}, &out, &errOut); code == 0 ||
		!strings.HasPrefix(errOut.String(), "error: "+state.CodeStateNotFound) {
		t.Fatalf("missing operator: exit %d, %q", code, errOut.String())
	}
}
