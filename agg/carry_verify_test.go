package agg

import (
	"strings"
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

// removeOnFirstTouchFS removes path at the first Stat or Open of it: after
// a Stat answers, before an Open runs, as a user or a copy that removes the
// carry between a reader's listing of it and its open would.
type removeOnFirstTouchFS struct {
	vfs.FS
	path    string
	touched bool
}

func (f *removeOnFirstTouchFS) touch(name string) {
	if name == f.path && !f.touched {
		f.touched = true
		_ = f.FS.Remove(name)
	}
}

func (f *removeOnFirstTouchFS) Stat(name string) (vfs.FileInfo, error) {
	fi, err := f.FS.Stat(name)
	f.touch(name)
	return fi, err
}

func (f *removeOnFirstTouchFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f.touch(name)
	return f.FS.Open(name, opts...)
}

// TestCarryRemovedWhileRead: a carry file removed between the read of the
// record that names it and its open is, to a check (verify, a start),
// CarryGone, the documented fallback; to a batch already merging by it, a
// CHECKPOINT_CORRUPT error saying what to do. Both were a raw open error
// ("aggregation: open the closed-at-commit carry: open ...: file does not
// exist").
func TestCarryRemovedWhileRead(t *testing.T) {
	defer setCarryInlineMax(0)()
	checked := false
	_, _, _ = closedAtCommitRun(t, func(h *harness) {
		if checked {
			return
		}
		checked = true
		path := h.fs.PathJoin(h.stateDir, h.op.committed.CarryFile)
		if h.op.committed.CarryFile == "" {
			t.Fatal("version 0 names no carry file")
		}
		race := &removeOnFirstTouchFS{FS: h.fs, path: path}
		if st, err := VerifyCarry(race, h.stateDir, 0); st != CarryGone || err != nil || !race.touched {
			t.Fatalf("VerifyCarry with the carry removed while read: %v, %v (touched %v); want %v, no error", st, err, race.touched, CarryGone)
		}
		if _, err := h.fs.Stat(path); err == nil {
			t.Fatal("the carry file is still there")
		}
		if _, ok, err := ReadStateRecord(h.fs, h.stateDir, 0); !ok || err != nil {
			t.Fatalf("ReadStateRecord of a version whose carry is gone: %v, %v; want the record", ok, err)
		}
		// A batch that found the file at its start (findCarry) and reads it
		// at its first get.
		ref := &carryRef{version: 0, rec: h.op.committed}
		_, _, err := ref.get(h.fs, h.stateDir, []byte("k"))
		if errcode.Code(err) != errcode.CheckpointCorrupt || !strings.Contains(err.Error(), "To fix: restart the query") {
			t.Fatalf("a batch reading a removed carry: %v; want %s with its remedy", err, errcode.CheckpointCorrupt)
		}
		h.restart(false)
	}, false)
	if !checked {
		t.Fatal("the run never reached its commit of batch 0")
	}
}
