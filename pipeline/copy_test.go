package pipeline

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/relocate"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/storage/s3test"
)

// copyPair copies the checkpoint and table at (ck, table) to (ck2, table2),
// any mix of local paths and s3:// locations.
func copyPair(t *testing.T, ck, table, ck2, table2 string) relocate.Result {
	t.Helper()
	var locs []storage.Location
	for _, v := range []string{ck, table, ck2, table2} {
		l, err := storage.Parse("location", v)
		if err != nil {
			t.Fatal(err)
		}
		locs = append(locs, l)
	}
	fs, err := storage.NewFS(context.Background(), vfs.Default, locs...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := relocate.Copy(context.Background(), relocate.Options{FS: fs, From: locs[0].Path, To: locs[2].Path, TableFrom: locs[1].Path, TableTo: locs[3].Path})
	if err != nil {
		t.Fatalf("copy %s -> %s: %v", ck, ck2, err)
	}
	return res
}

// TestCopyAcrossStores runs one batch, copies the stopped query's
// checkpoint and table from local to S3, S3 to S3 and S3 back to local
// (`checkpoint copy`), resumes each copy with a new state cache and
// compares the table and the state with a run that never moved; the
// source of each copy is left byte-identical (but for its lock).
func TestCopyAcrossStores(t *testing.T) {
	refTable, refState := reference(t)
	uri := archiveURI(t)
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		local := t.TempDir()
		for _, tc := range []struct{ name, ck, table, ck2, table2 string }{
			{"local to s3", filepath.Join(local, "a/ck"), filepath.Join(local, "a/table"), s.Location("b/ck"), s.Location("b/table")},
			{"s3 to s3", s.Location("c/ck"), s.Location("c/table"), s.Location("d/ck"), s.Location("d/table")},
			{"s3 to local", s.Location("e/ck"), s.Location("e/table"), filepath.Join(local, "f/ck"), filepath.Join(local, "f/table")},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cfg := s3Config(tc.ck, tc.table, t.TempDir(), uri)
				cfg.MaxBatches = 1
				first, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				var before string
				if filepath.IsAbs(tc.ck) {
					before = treeHash(t, tc.ck, tc.table)
				}
				res := copyPair(t, tc.ck, tc.table, tc.ck2, tc.table2)
				if res.CheckpointFiles == 0 || res.TableFiles == 0 {
					t.Fatalf("copied %+v", res)
				}
				if before != "" && treeHash(t, tc.ck, tc.table) != before {
					t.Fatal("the copy changed its source")
				}
				cfg = s3Config(tc.ck2, tc.table2, t.TempDir(), uri)
				sum, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatalf("resume on the copy: %v", err)
				}
				if sum.QueryID != first.QueryID || sum.FirstBatchID != first.LastBatchID+1 {
					t.Fatalf("the copy resumed as query %s at batch %d; want %s at %d", sum.QueryID, sum.FirstBatchID, first.QueryID, first.LastBatchID+1)
				}
				if d := diffCounts(refTable, locTableCounts(t, tc.table2)); d != "" {
					t.Fatalf("table: %s", d)
				}
				if got := stateDump(t, tc.ck2); got != refState {
					t.Fatalf("state differs from the run that never moved:\n%s\nwant\n%s", got, refState)
				}
			})
		}
	})
}
