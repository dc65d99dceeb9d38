package demo

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTransactionsLifecycle runs the transactions lifecycle at a small
// scale (60 archive blocks, 5-block live batches) and requires every
// check: the archive's transactions read once, the live blocks read, the
// state shrunk to 8 partitions, and the table equal to the independent
// recount of the archive's files and the node's receipts.
func TestTransactionsLifecycle(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	rep, err := RunTransactions(t.Context(), TxOptions{WorkDir: dir, ResultsDir: filepath.Join(dir, "results"), Blocks: 60,
		AddLiveBatches: 2, RetireBatches: 2, ShrinkBatches: 2, BlocksPerBatch: 5, Out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !rep.Passed() {
		t.Fatalf("checks failed:\n%s", out.String())
	}
	t.Log(out.String())
	for _, c := range rep.Checks {
		if strings.HasPrefix(c.Name, "T4. transactions") && c.Actual == "0" {
			t.Fatalf("an empty table: %s", out.String())
		}
	}
}
