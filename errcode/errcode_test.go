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

// TestCodeNamesTheStorageCause: a sink or checkpoint error wrapping an
// object store's failure is coded by the store's failure (the cause), not
// by the wrapper, however deep it is.
func TestCodeNamesTheStorageCause(t *testing.T) {
	store := New(StorageUnavailable, "s3://lake/t/part-0", "check the endpoint", "the endpoint did not answer")
	wrapped := fmt.Errorf("add batch 3: %w", Wrap(fmt.Errorf("write part-0: %w", store), "DELTA_CORRUPT_FILE", "/t", "", "cannot write the table"))
	if got := Code(wrapped); got != StorageUnavailable {
		t.Fatalf("Code = %q, want %s", got, StorageUnavailable)
	}
	for _, code := range []string{ReadOnlyStorage, StorageCredentials, StorageWriteLost} {
		err := Wrap(Wrap(New(code, "", "", "x"), CheckpointCorrupt, "", "", "y"), InvalidArgument, "", "", "z")
		if got := Code(err); got != code {
			t.Fatalf("Code = %q, want %s", got, code)
		}
	}
	// Without a storage cause, the outermost code stands.
	if got := Code(Wrap(Corrupt("/ck/x", nil, "bad"), InvalidArgument, "", "", "z")); got != InvalidArgument {
		t.Fatalf("Code = %q, want %s", got, InvalidArgument)
	}
}
