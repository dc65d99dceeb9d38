package agg

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// TestVerifyCarry: `checkpoint verify`'s check of the carry a state
// version names (VerifyCarry): an intact one is found and verifies, inline
// or in a file; a file that is gone or whose bytes changed is
// CHECKPOINT_CORRUPT; a version without one is not reported.
func TestVerifyCarry(t *testing.T) {
	for _, c := range []struct {
		name   string
		inline bool
		damage func(fs vfs.FS, path string) error
		code   string
	}{
		{"inline", true, nil, ""},
		{"file", false, nil, ""},
		{"gone", false, func(fs vfs.FS, path string) error { return fs.Remove(path) }, errcode.CheckpointCorrupt},
		{"records", false, func(fs vfs.FS, path string) error { return flipByte(fs, path, carryHeaderSize+2) }, errcode.CheckpointCorrupt},
		{"footer", false, func(fs vfs.FS, path string) error { return flipByte(fs, path, -3) }, errcode.CheckpointCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !c.inline {
				defer setCarryInlineMax(0)()
			}
			checked := false
			_, _, _ = closedAtCommitRun(t, func(h *harness) {
				if checked {
					return
				}
				checked = true
				if c.damage != nil {
					if err := c.damage(h.fs, h.fs.PathJoin(h.stateDir, h.op.committed.CarryFile)); err != nil {
						t.Fatal(err)
					}
				}
				found, err := VerifyCarry(h.fs, h.stateDir, 0)
				if !found || errcode.Code(err) != c.code || (c.code == "") != (err == nil) {
					t.Fatalf("VerifyCarry of version 0: found %v, %v; want found, code %q", found, err, c.code)
				}
				// Version 0 has a carry; a version that does not exist
				// names none.
				if found, err := VerifyCarry(h.fs, h.stateDir, 7); found || err != nil {
					t.Fatalf("VerifyCarry of a missing version: %v %v", found, err)
				}
				h.restart(false)
			}, false)
			if !checked {
				t.Fatal("the run never reached its commit of batch 0")
			}
		})
	}
}
