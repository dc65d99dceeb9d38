package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
)

// TestCheckCommittedLive: a commit log more than one batch behind the
// offsets log is damage on a stopped checkpoint, but a listing taken while
// a query writes (its logs list differently the second time) is left to
// the lock, which refuses the start with CHECKPOINT_LOCKED.
func TestCheckCommittedLive(t *testing.T) {
	fs := vfs.NewMem()
	w, err := checkpoint.Lock(fs, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetadata(checkpoint.Metadata{ID: "9f1c0d2e-0000-4000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	for id := int64(0); id < 3; id++ {
		e := &checkpoint.OffsetEntry{Version: checkpoint.OffsetsV1, Metadata: checkpoint.OffsetMetadata{
			Conf: map[string]string{checkpoint.ConfProviderClass: checkpoint.ProviderPebble}},
			Sources: []checkpoint.SourceOffset{{Key: "0", Offset: json.RawMessage(`{"block":1}`)}}}
		if err := w.WriteOffsets(id, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteCommit(0, &checkpoint.CommitEntry{}); err != nil {
		t.Fatal(err)
	}
	d := checkpoint.Dir{FS: fs, Path: "/ck"}
	snap, err := d.ReadSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCommitted(context.Background(), fs, d, snap, nil); !errcode.Is(err, errcode.CheckpointCorrupt) {
		t.Fatalf("commits/0 under offsets/2: %v, want %s", err, errcode.CheckpointCorrupt)
	}
	stale, err := startLogs(d, snap)
	if err != nil {
		t.Fatal(err)
	}
	if live(d, stale) {
		t.Fatal("a stopped checkpoint lists differently twice")
	}
	// A running query commits batch 1 after the first listing.
	if err := w.WriteCommit(1, &checkpoint.CommitEntry{}); err != nil {
		t.Fatal(err)
	}
	if !live(d, stale) {
		t.Fatal("a commit between the listings is not seen as a live checkpoint")
	}
}
