package state

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

func TestDump(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	e := &env{t: t, fs: fs, dir: "ckpt/state/0", local: t.TempDir()}
	s := e.open(3, -1)
	ts := time.Date(2026, 11, 29, 12, 5, 0, 0, time.UTC)
	put := func(end time.Time, src, miner string, c int64) {
		k := s.EncodeKey(nil, end, end.Add(-5*time.Minute), src, miner)
		if err := s.Put(k, s.EncodeValue(nil, c)); err != nil {
			t.Fatal(err)
		}
	}
	put(ts, "eth_live", "0xaa", 3)
	put(ts, "s3_backfill", "0xbb,\"q\"", 1)
	if _, err := s.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	put(ts.Add(5*time.Minute), "eth_live", "0xaa", 7)
	if _, err := s.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Only batch 0 is committed in the commit log: version 1 belongs to a
	// batch that will re-run and must not be shown.
	if err := fs.MkdirAll("ckpt/commits", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("ckpt/commits/0", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	run := func(format string, batch int64) string {
		var b bytes.Buffer
		if _, err := Dump(ctx, DumpOptions{FS: fs, Checkpoint: "ckpt", Batch: batch, Format: format}, &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	p1 := PartitionOf(EncodeKeyRow(nil, testSchema.Key, ts, ts.Add(-5*time.Minute), "eth_live", "0xaa"), 3)
	p2 := PartitionOf(EncodeKeyRow(nil, testSchema.Key, ts, ts.Add(-5*time.Minute), "s3_backfill", "0xbb,\"q\""), 3)
	rows := []string{
		"2026-11-29T12:05:00Z,2026-11-29T12:00:00Z,eth_live,0xaa,3," + strconv.Itoa(p1) + "\n",
		"2026-11-29T12:05:00Z,2026-11-29T12:00:00Z,s3_backfill,\"0xbb,\"\"q\"\"\",1," + strconv.Itoa(p2) + "\n",
	}
	if p2 < p1 {
		rows[0], rows[1] = rows[1], rows[0]
	}
	want := "window_end,window_start,source,miner,count,partition\n" + rows[0] + rows[1]
	if got := run("csv", -1); got != want {
		t.Fatalf("csv:\n%s\nwant:\n%s", got, want)
	}
	got := run("jsonl", 1)
	if n := bytes.Count([]byte(got), []byte("\n")); n != 3 {
		t.Fatalf("jsonl at batch 1 has %d lines:\n%s", n, got)
	}
	if !bytes.Contains([]byte(got), []byte(`{"window_end":"2026-11-29T12:10:00Z","window_start":"2026-11-29T12:05:00Z","source":"eth_live","miner":"0xaa","count":7,"partition":`)) {
		t.Fatalf("jsonl:\n%s", got)
	}
	// A preferred column order (the query's output order); unknown names are
	// ignored, unnamed fields follow in schema order.
	var b bytes.Buffer
	if _, err := Dump(ctx, DumpOptions{FS: fs, Checkpoint: "ckpt", Batch: -1, Format: "csv",
		Columns: []string{"window_start", "window_end", "no_such", "source"}}, &b); err != nil {
		t.Fatal(err)
	}
	reorder := func(r string) string {
		c := strings.SplitN(r, ",", 3)
		return c[1] + "," + c[0] + "," + c[2]
	}
	if want := "window_start,window_end,source,miner,count,partition\n" + reorder(rows[0]) + reorder(rows[1]); b.String() != want {
		t.Fatalf("csv in preferred order:\n%s\nwant:\n%s", b.String(), want)
	}
	_, err = Dump(ctx, DumpOptions{FS: fs, Checkpoint: "ckpt", Operator: 4, Batch: -1}, &bytes.Buffer{})
	if !errcode.Is(err, CodeStateNotFound) {
		t.Fatalf("missing operator: %v", err)
	}
}
