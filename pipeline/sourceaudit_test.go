package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

// TestStartAuditsTheSourceLog: a start on a checkpoint whose offsets/1
// names file source log id 1, with sources/arch/1 deleted, is refused
// CHECKPOINT_CORRUPT naming the source's log and the offsets entry, before
// it writes anything: the file source checks its own log against the
// offset (stream.OffsetAuditor); the engine reads no offset itself.
func TestStartAuditsTheSourceLog(t *testing.T) {
	base := t.TempDir()
	if err := damageRun(t, base, 2); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(base, "ck")
	if err := os.Remove(filepath.Join(ck, "sources", flSource, "1")); err != nil {
		t.Fatal(err)
	}
	err := damageRun(t, base, 3)
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != errcode.CheckpointCorrupt || ce.Path != filepath.Join(ck, "sources", flSource) ||
		!strings.Contains(err.Error(), filepath.Join(ck, "offsets", "1")+" names file source log id 1") {
		t.Fatalf("start: %v, want CHECKPOINT_CORRUPT naming sources/%s and offsets/1", err, flSource)
	}
	if _, err := os.Stat(filepath.Join(ck, "offsets", "2")); !os.IsNotExist(err) {
		t.Fatalf("the refused start wrote offsets/2 (%v)", err)
	}
}
