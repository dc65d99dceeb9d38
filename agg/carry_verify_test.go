package agg

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// TestVerifyCarry: `checkpoint verify`'s check of the carry a state
// version names (VerifyCarry): an intact one is found and verifies, inline
// or in a file; a file whose bytes changed is CHECKPOINT_CORRUPT, and
// ReadStateRecord (what a start checks) refuses it too; a file that is
// gone is CarryGone, the run's documented fallback; a version without one
// is CarryNone.
func TestVerifyCarry(t *testing.T) {
	for _, c := range []struct {
		name   string
		inline bool
		damage func(fs vfs.FS, path string) error
		want   CarryState
		code   string
	}{
		{"inline", true, nil, CarryGood, ""},
		{"file", false, nil, CarryGood, ""},
		{"gone", false, func(fs vfs.FS, path string) error { return fs.Remove(path) }, CarryGone, ""},
		{"records", false, func(fs vfs.FS, path string) error { return flipByte(fs, path, carryHeaderSize+2) }, CarryGood, errcode.CheckpointCorrupt},
		{"footer", false, func(fs vfs.FS, path string) error { return flipByte(fs, path, -3) }, CarryGood, errcode.CheckpointCorrupt},
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
				st, err := VerifyCarry(h.fs, h.stateDir, 0)
				if st != c.want || errcode.Code(err) != c.code || (c.code == "") != (err == nil) {
					t.Fatalf("VerifyCarry of version 0: %v, %v; want %v, code %q", st, err, c.want, c.code)
				}
				if _, _, err := ReadStateRecord(h.fs, h.stateDir, 0); errcode.Code(err) != c.code || (c.code == "") != (err == nil) {
					t.Fatalf("ReadStateRecord of version 0: %v; want code %q", err, c.code)
				}
				// Version 0 has a carry; a version that does not exist
				// names none.
				if st, err := VerifyCarry(h.fs, h.stateDir, 7); st != CarryNone || err != nil {
					t.Fatalf("VerifyCarry of a missing version: %v %v", st, err)
				}
				h.restart(false)
			}, false)
			if !checked {
				t.Fatal("the run never reached its commit of batch 0")
			}
		})
	}
}
