package pipeline

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/storage/s3test"
)

// TestCopyBetweenServers copies a stopped query's checkpoint and table
// straight from the embedded endpoint to Versity Gateway and back (issue
// 27.5: two S3 servers, two endpoints, one command), resumes each copy
// with a new state cache, and compares the table and the state with a run
// that never moved; the resumed query keeps its id and its batch ids run
// on. It needs Versity (.ci/run) and is skipped without it (failed with
// CI=true).
func TestCopyBetweenServers(t *testing.T) {
	refTable, refState := reference(t)
	uri := archiveURI(t)
	emb, ver := s3test.Embedded(t), s3test.Versity(t)
	for _, tc := range []struct {
		name     string
		from, to s3test.Server
	}{
		{"embedded to versity", emb, ver},
		{"versity to embedded", ver, emb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := tc.from.Name + "-to-" + tc.to.Name
			ck, table := tc.from.Location(prefix+"/ck"), tc.from.Location(prefix+"/table")
			ck2, table2 := tc.to.Location(prefix+"/ck"), tc.to.Location(prefix+"/table")
			cfg := s3Config(ck, table, t.TempDir(), uri)
			cfg.MaxBatches = 1
			first, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := contentKeys(tc.from.Keys(t, prefix+"/"))
			res := copyPair(t, ck, table, ck2, table2)
			if res.CheckpointFiles == 0 || res.TableFiles == 0 {
				t.Fatalf("copied %+v", res)
			}
			// The copy holds the source's lease while it reads (its .lock/
			// generations move on); nothing else of the source changes.
			if after := contentKeys(tc.from.Keys(t, prefix+"/")); !slices.Equal(after, before) {
				t.Fatalf("the copy changed its source's keys:\n%v\n->\n%v", before, after)
			}
			sum, err := Run(context.Background(), s3Config(ck2, table2, t.TempDir(), uri))
			if err != nil {
				t.Fatalf("resume on the copy: %v", err)
			}
			if sum.QueryID != first.QueryID || sum.FirstBatchID != first.LastBatchID+1 {
				t.Fatalf("the copy resumed as query %s at batch %d; want %s at %d", sum.QueryID, sum.FirstBatchID, first.QueryID, first.LastBatchID+1)
			}
			if d := diffCounts(refTable, locTableCounts(t, table2)); d != "" {
				t.Fatalf("table: %s", d)
			}
			if got := stateDump(t, ck2); got != refState {
				t.Fatalf("state differs from the run that never moved:\n%s\nwant\n%s", got, refState)
			}
		})
	}
}

// contentKeys returns keys without the checkpoint lease's objects.
func contentKeys(keys []string) []string {
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return strings.Contains(k, "/.lock/") })
}
