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
	want := "read offsets: CHECKPOINT_CORRUPT: truncated offsets file (path: /ck/offsets/3): unexpected EOF. restore the file from a backup or move the checkpoint aside; ethstream never resets it silently"
	if err.Error() != want {
		t.Fatalf("got  %q\nwant %q", err.Error(), want)
	}
	if !errors.Is(err, cause) {
		t.Fatal("cause lost")
	}
	if Code(errors.New("plain")) != "" || Is(nil, CheckpointCorrupt) {
		t.Fatal("plain errors have no code")
	}
}
