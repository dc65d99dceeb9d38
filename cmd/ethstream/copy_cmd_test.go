package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/storage/s3serve"
)

// TestCheckpointCopyCommand moves a stopped query local -> S3 (the
// embedded endpoint) -> local with `checkpoint copy`, resuming it at each
// place: the same query id throughout, the copy refused while the query
// holds its lock or onto a destination that holds files, and the final
// table equal to a run that never moved.
func TestCheckpointCopyCommand(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	// Three days, one file each, one file a batch: a batch at each place.
	archive := filepath.Join(root, "archive")
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: archive, Preset: chain.RangePreset(chain.FirstDay, 3), Seed: 3}); err != nil {
		t.Fatal(err)
	}
	uri := "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks"
	if err := os.MkdirAll(filepath.Join(root, "s3", "lake"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := s3serve.Start(ctx, s3serve.Options{Root: filepath.Join(root, "s3"), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	opt := "?endpoint=" + srv.URL() + "&anonymous=true"
	src := "arch=s3archive:" + uri + "?maxFilesPerTrigger=1"
	run := func(ck, tbl string, extra ...string) {
		t.Helper()
		args := append([]string{"run", "--checkpoint", ck, "--table", tbl, "--local-dir", t.TempDir(), "--source", src,
			"--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true"}, extra...)
		if code, _, errOut := cli(t, ctx, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
	}
	// queryID is the checkpoint's query id and its last committed batch.
	queryID := func(ck string) string {
		t.Helper()
		code, out, errOut := cli(t, ctx, "checkpoint", "inspect", ck, "--json")
		var rep struct {
			QueryID string `json:"queryId"`
			Last    int64  `json:"latestCommittedBatchId"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("inspect %s: %d %s", ck, code, errOut)
		}
		return rep.QueryID + "@" + strconv.FormatInt(rep.Last, 10)
	}
	ref := filepath.Join(root, "ref")
	run(ref+"/ck", ref+"/table")
	want := tableRows(t, ref+"/table")
	if len(want) < 100 {
		t.Fatalf("the reference table has %d rows", len(want))
	}
	_, refLast, _ := strings.Cut(queryID(ref+"/ck"), "@")

	a := filepath.Join(root, "a")
	run(a+"/ck", a+"/table", "--max-batches", "1")
	id, _, _ := strings.Cut(queryID(a+"/ck"), "@")
	s3ck, s3tbl := "s3://lake/q1/checkpoint"+opt, "s3://lake/q1/table"+opt
	copyArgs := []string{"checkpoint", "copy", a + "/ck", s3ck, "--table", a + "/table", "--table-to", s3tbl}

	// While a query holds the source's lock: refused, nothing written.
	w, err := checkpoint.Lock(vfs.Default, a+"/ck")
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cli(t, ctx, copyArgs...)
	w.Close()
	if code != 1 || !strings.Contains(errOut, "CHECKPOINT_LOCKED") {
		t.Fatalf("copy of a locked checkpoint: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "s3", "lake", "q1")); !os.IsNotExist(err) {
		t.Fatalf("a refused copy wrote to its destination: %v", err)
	}

	before := treeHash(t, a)
	code, out, errOut := cli(t, ctx, copyArgs...)
	if code != 0 || !strings.Contains(out, "verified") || !strings.Contains(out, "resume with --checkpoint") {
		t.Fatalf("copy to S3: exit %d\n%s%s", code, out, errOut)
	}
	// The source is left as it was but for its lock, which it had already.
	if treeHash(t, a) != before {
		t.Fatal("the copy changed its source")
	}
	if code, _, errOut := cli(t, ctx, copyArgs...); code != 1 || !strings.Contains(errOut, "COPY_DESTINATION_NOT_EMPTY") {
		t.Fatalf("copy onto a copy: exit %d\n%s", code, errOut)
	}
	run(s3ck, s3tbl, "--max-batches", "1")
	if got := queryID(s3ck); got != id+"@1" {
		t.Fatalf("the S3 copy runs as query %s, not %s", got, id)
	}

	b := filepath.Join(root, "b")
	if code, out, errOut := cli(t, ctx, "checkpoint", "copy", s3ck, b+"/ck", "--table", s3tbl, "--table-to", b+"/table"); code != 0 {
		t.Fatalf("copy back: exit %d\n%s%s", code, out, errOut)
	}
	run(b+"/ck", b+"/table")
	if got := queryID(b + "/ck"); got != id+"@"+refLast {
		t.Fatalf("the local copy ran to query %s, not %s@%s as the run that never moved", got, id, refLast)
	}
	if got := tableRows(t, b+"/table"); !slices.Equal(got, want) {
		t.Fatalf("the moved query's table (%d rows) differs from the one that never moved (%d rows)", len(got), len(want))
	}
	if code, _, errOut := cli(t, ctx, "checkpoint", "copy", a+"/ck", b+"/x", "--table", a+"/table"); code != 2 || !strings.Contains(errOut, "MISSING_REQUIRED_FLAG") {
		t.Fatalf("--table without --table-to: exit %d\n%s", code, errOut)
	}
}

// tableRows reads the latest snapshot of the local table at dir as sorted
// lines.
func tableRows(t *testing.T, dir string) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := delta.OpenFS(ctx, vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	err = snap.Rows(ctx, func(r map[string]any) error {
		rows = append(rows, fmt.Sprint(r))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rows)
	return rows
}
