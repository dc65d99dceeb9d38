package errcode

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorFormatAndCode(t *testing.T) {
	cause := errors.New("unexpected EOF")
	err := fmt.Errorf("read offsets: %w", Corrupt("/ck/offsets/3", cause, "truncated offsets file"))
	if got := Code(err); got != CheckpointCorrupt {
		t.Fatalf("Code = %q", got)
	}
	want := "read offsets: CHECKPOINT_CORRUPT: truncated offsets file (path: /ck/offsets/3): unexpected EOF. To fix: restore the file from a backup or move the checkpoint aside; ethstream never resets it silently"
	if err.Error() != want {
		t.Fatalf("got  %q\nwant %q", err.Error(), want)
	}
	if !errors.Is(err, cause) {
		t.Fatal("cause lost")
	}
	named := New(TombstoneNameReuse, "/ck", "pick a different name", "name 'a' was removed from the query at /ck")
	if got := named.Error(); got != "STREAMING_QUERY_EVOLUTION_ERROR.TOMBSTONE_SOURCE_NAME_REUSE: name 'a' was removed from the query at /ck. To fix: pick a different name" {
		t.Fatalf("path repeated or remedy unlabelled: %q", got)
	}
	if Code(errors.New("plain")) != "" || Is(nil, CheckpointCorrupt) {
		t.Fatal("plain errors have no code")
	}
}
