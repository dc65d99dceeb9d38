package delta

import (
	"context"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// signed builds a batch whose rows marked del carry Sign -1.
func signed(rows []refRow) *signedBatch { return &signedBatch{rows: rows} }

type signedBatch struct{ rows []refRow }

func (s *signedBatch) add(ctx context.Context, t *testing.T, m *MergeSink, id int64) map[string]string {
	t.Helper()
	b := mkBatch(s.rows)
	for i, r := range s.rows {
		if r.del {
			if b.Signs == nil {
				b.Signs = make([]int8, b.Len)
				for j := range b.Signs {
					b.Signs[j] = 1
				}
			}
			b.Signs[i] = -1
		}
	}
	p, err := m.AddBatch(ctx, id, b)
	if err != nil {
		t.Fatal(err)
	}
	return p.Metrics
}

// TestSinkDeletesRetractedRows: random batches of upserts and deletions
// (Sign -1, the rows of groups emptied by retractions) against a map
// oracle; deletions of absent keys insert nothing; numTargetRowsDeleted
// counts what left; a re-run batch writes nothing.
func TestSinkDeletesRetractedRows(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 40)
	rng := rand.New(rand.NewSource(3))
	oracle := map[oracleKey]int64{}
	var deletedTotal int64
	for batch := int64(0); batch < 30; batch++ {
		var rows []refRow
		var wantDeleted int64
		seen := map[oracleKey]bool{}
		for i := 0; i < 1+rng.Intn(30); i++ {
			win := int(batch)/2 + rng.Intn(4)
			r := row(win, "eth_live", minerName(rng.Intn(8)), int64(1+rng.Intn(50)))
			k := oracleKey{r.WS, r.Source, r.Miner}
			if seen[k] {
				continue // the operator emits a key once per batch
			}
			seen[k] = true
			if rng.Intn(3) == 0 {
				r.del, r.Count = true, 0
				if _, ok := oracle[k]; ok {
					wantDeleted++
				}
				delete(oracle, k)
			} else {
				oracle[k] = r.Count
			}
			rows = append(rows, r)
		}
		m := signed(rows).add(ctx, t, s, batch)
		if m["numTargetRowsDeleted"] != itoa64(wantDeleted) || m["numTargetRowsMatchedDeleted"] != itoa64(wantDeleted) {
			t.Fatalf("batch %d: metrics %v, want %d deleted", batch, m, wantDeleted)
		}
		deletedTotal += wantDeleted
		got := tableRows(t, dir, -1)
		if len(got) != len(oracle) {
			t.Fatalf("batch %d: %d rows, oracle %d", batch, len(got), len(oracle))
		}
		for k, v := range oracle {
			if g, ok := got[k]; !ok || g != v {
				t.Fatalf("batch %d: key %v = %d (present %v), oracle %d", batch, k, g, ok, v)
			}
		}
		// The re-run of the batch (after a crash) is skipped.
		v := s.Version()
		if m := signed(rows).add(ctx, t, s, batch); m["skipped"] != "true" || s.Version() != v {
			t.Fatalf("batch %d re-run: %v, version %d -> %d", batch, m, v, s.Version())
		}
	}
	if deletedTotal == 0 {
		t.Fatal("no row was deleted: the test lost its point")
	}
}

// TestSinkDeleteCommit: a batch that deletes every row of a file removes the
// file and adds none, and its commitInfo shows the DELETE clause.
func TestSinkDeleteCommit(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 100)
	a, b := row(0, "eth_live", minerName(1), 3), row(0, "eth_live", minerName(2), 4)
	signed([]refRow{a, b}).add(ctx, t, s, 0)
	a.del, b.del = true, true
	m := signed([]refRow{a, b}).add(ctx, t, s, 1)
	if m["numTargetRowsDeleted"] != "2" || m["numTargetFilesAdded"] != "0" || m["numTargetFilesRemoved"] != "1" {
		t.Fatalf("metrics %v", m)
	}
	if got := tableRows(t, dir, -1); len(got) != 0 {
		t.Fatalf("rows left: %v", got)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "_delta_log", "00000000000000000002.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ci struct {
		CommitInfo struct {
			OperationParameters map[string]string `json:"operationParameters"`
		} `json:"commitInfo"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(string(raw), "\n", 2)[0]), &ci); err != nil {
		t.Fatal(err)
	}
	if mp := ci.CommitInfo.OperationParameters["matchedPredicates"]; !strings.Contains(mp, `"actionType":"delete"`) {
		t.Fatalf("matchedPredicates %s", mp)
	}
	if strings.Count(string(raw), `"add"`) != 0 || strings.Count(string(raw), `"remove"`) != 1 {
		t.Fatalf("commit:\n%s", raw)
	}
}

func itoa64(n int64) string { b, _ := json.Marshal(n); return string(b) }
