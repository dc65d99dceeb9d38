package engine

import (
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/checkpoint"
)

// TestLogStart: a start says which batch it runs first (a pending batch
// re-runs before the next new one) and what happens to each source.
func TestLogStart(t *testing.T) {
	var b strings.Builder
	l := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	sp := &startPlan{Added: []string{"eth_live"}, Resumed: []string{"s3_backfill"},
		Committed:     map[string]json.RawMessage{"s3_backfill": json.RawMessage(`{"logOffset":11}`)},
		NewTombstones: map[string]checkpoint.Tombstone{"old": {RemovedInBatch: -1, LastOffset: json.RawMessage(`{"block":7}`)}},
		Pending:       &checkpoint.OffsetEntry{}, PendingID: 0}
	logStart(l, "ck", "q", "r", sp, 1, 8)
	want := `level=INFO msg="query started" queryId=q runId=r checkpoint=ck rerunBatch=0 nextBatch=1 statePartitions=8
level=INFO msg="source added" source=eth_live from="its configured start"
level=INFO msg="source resumed" source=s3_backfill from="{\"logOffset\":11}"
level=INFO msg="source tombstoned" source=old lastOffset="{\"block\":7}"
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	logStart(l, "ck", "q", "r", &startPlan{}, 5, 200)
	if !regexp.MustCompile(`^level=INFO msg="query started" queryId=q runId=r checkpoint=ck nextBatch=5 statePartitions=200\n$`).MatchString(b.String()) {
		t.Fatalf("no pending batch:\n%s", b.String())
	}
}
