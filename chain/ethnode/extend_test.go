package ethnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/internal/streamtest"
)

// TestExtend: an archive extended by k blocks has a manifest ReadManifest
// accepts, whose last block and hash are those a node started on the
// original archive serves at that height, and one file per new date in
// blocks and in every table; the stage is gone.
func TestExtend(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m, err := archivegen.Generate(ctx, archivegen.Options{Out: dir, Preset: chain.LastBlocksPreset(20), Seed: 3, Tables: archivegen.Tables[1:]})
	if err != nil {
		t.Fatal(err)
	}
	const k = 7
	ext, err := Extend(ctx, vfs.Default, dir, k)
	if err != nil {
		t.Fatal(err)
	}
	back, err := archivegen.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	orig := startTestNode(t, Options{Manifest: m, Seed: m.Seed, Manual: true, InitialBlocks: k + 1})
	if h := orig.Header(m.LastBlock + k); back.LastBlock != m.LastBlock+k || h == nil || back.LastHash != h.Hash().Hex() || back.Rows != m.Rows+k {
		t.Fatalf("extended manifest: last %d %s rows %d; the node's block %d is %v", back.LastBlock, back.LastHash, back.Rows, m.LastBlock+k, h)
	}
	if ext.Manifest.LastHash != back.LastHash || ext.FirstBlock != m.LastBlock+1 || ext.Resumed || len(back.Tables) != len(m.Tables) {
		t.Fatalf("returned %+v, written %s; tables %d, were %d", ext, back.LastHash, len(back.Tables), len(m.Tables))
	}
	for name, tb := range back.Tables {
		if len(tb.Files) != len(back.Files) || tb.Rows < m.Tables[name].Rows {
			t.Fatalf("table %s: %d files for %d blocks files, %d rows (was %d)", name, len(tb.Files), len(back.Files), tb.Rows, m.Tables[name].Rows)
		}
	}
	if _, err := os.Stat(archivegen.StageRoot(dir)); !os.IsNotExist(err) {
		t.Fatalf("stage left after the extension: %v", err)
	}
}

// archiveState is what readers of an archive see: manifest.json's bytes and
// each data file a lister finds (archivegen.DataFiles), with its bytes.
type archiveState struct {
	manifest []byte
	files    map[string][]byte
}

func readState(t *testing.T, fs vfs.FS, dir string) archiveState {
	t.Helper()
	st := archiveState{manifest: readAll(t, fs, filepath.Join(dir, archivegen.ManifestName)), files: map[string][]byte{}}
	keys, err := archivegen.DataFiles(fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		st.files[k] = readAll(t, fs, filepath.Join(dir, filepath.FromSlash(k)))
	}
	return st
}

func readAll(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// copyTree copies the directory src of the disk into mem at the same path,
// every file and directory synced, so a CrashClone keeps it all.
func copyTree(t *testing.T, src string, mem *vfs.MemFS) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return streamtest.MkdirAllDurable(mem, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = durable.Bytes(durable.Local{FS: mem}, filepath.Dir(p), filepath.Base(p), durable.Options{Mode: durable.Replace}, b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// temps lists the temp files (durable.IsTemp) under dir.
func temps(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	var out []string
	var walk func(d string)
	walk = func(d string) {
		names, err := fs.List(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := filepath.Join(d, n)
			if st, err := fs.Stat(p); err == nil && st.IsDir() {
				walk(p)
			} else if durable.IsTemp(n) {
				out = append(out, p)
			}
		}
	}
	walk(dir)
	return out
}

// TestExtendCrashAtEveryOperation fails the i-th file operation of an
// extension, for every i, crashes (unsynced data and directory entries
// lost), and checks what a reader then sees: manifest.json is the one
// before or the one after; the data files a lister finds are before's, or
// after's, or (only with the journal there, so that the next run completes
// the extension) before's plus some of after's, every one byte-identical to
// the uninterrupted extension's. The same command run again then leaves the
// archive byte-identical to the uninterrupted extension, with no stage and
// no temp file. On the old Extend (part files written in place, then the
// manifest) a crash between them left a partial extension with the old
// manifest and no journal.
func TestExtendCrashAtEveryOperation(t *testing.T) {
	ctx := context.Background()
	disk := t.TempDir()
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: disk, Preset: chain.LastBlocksPreset(20), Seed: 3, Tables: archivegen.Tables[1:]}); err != nil {
		t.Fatal(err)
	}
	const k = 7
	base := vfs.NewCrashableMem()
	copyTree(t, disk, base)
	before := readState(t, base, disk)

	// The uninterrupted extension, and the number of operations it takes.
	ref := streamtest.NewFaultFSOver(disk, base.CrashClone(vfs.CrashCloneCfg{}))
	if _, err := Extend(ctx, ref.FS(), disk, k); err != nil {
		t.Fatal(err)
	}
	ops := ref.Ops()
	after := readState(t, ref.Mem(), disk)
	if len(after.files) <= len(before.files) || bytes.Equal(after.manifest, before.manifest) {
		t.Fatalf("the extension added nothing: %d files before, %d after", len(before.files), len(after.files))
	}
	if ops < 50 {
		t.Fatalf("an extension of %d operations: the loop would test little", ops)
	}

	var partial, resumed, restarted int
	for i := range ops {
		ffs := streamtest.NewFaultFSOver(disk, base.CrashClone(vfs.CrashCloneCfg{}))
		if _, err := ffs.Arm(fmt.Sprintf("(ErrInjected (OnIndex %d))", i)); err != nil {
			t.Fatal(err)
		}
		_, extendErr := Extend(ctx, ffs.FS(), disk, k)
		ffs.Crash()
		mem := ffs.Mem()
		got := readState(t, mem, disk)
		isBefore := bytes.Equal(got.manifest, before.manifest)
		if !isBefore && !bytes.Equal(got.manifest, after.manifest) {
			t.Fatalf("op %d (%v): manifest is neither before's nor after's:\n%s", i, extendErr, got.manifest)
		}
		for key, b := range got.files {
			if want, ok := after.files[key]; !ok || !bytes.Equal(b, want) {
				t.Fatalf("op %d (%v): data file %s (%d bytes) is not the extension's", i, extendErr, key, len(b))
			}
		}
		for key := range before.files {
			if _, ok := got.files[key]; !ok {
				t.Fatalf("op %d: data file %s of the archive lost", i, key)
			}
		}
		pending, err := archivegen.PendingExtension(mem, disk)
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		sameFiles := func(a map[string][]byte) bool { return len(got.files) == len(a) }
		switch {
		case pending != nil:
			if !sameFiles(before.files) && !sameFiles(after.files) {
				partial++
			}
		case isBefore && !sameFiles(before.files):
			t.Fatalf("op %d (%v): %d data files under the old manifest and no journal to complete them (before %d)", i, extendErr, len(got.files), len(before.files))
		case !isBefore && !sameFiles(after.files):
			t.Fatalf("op %d (%v): the new manifest with %d of its %d files", i, extendErr, len(got.files), len(after.files))
		}
		if pending != nil || isBefore {
			ext, err := Extend(ctx, ffs.FS(), disk, k)
			if err != nil {
				t.Fatalf("op %d: the re-run failed: %v", i, err)
			}
			if ext.Resumed != (pending != nil) {
				t.Fatalf("op %d: re-run resumed %v, journal %v", i, ext.Resumed, pending != nil)
			}
			if ext.Resumed {
				resumed++
			} else {
				restarted++
			}
		}
		final := readState(t, ffs.Mem(), disk)
		if !bytes.Equal(final.manifest, after.manifest) || len(final.files) != len(after.files) {
			t.Fatalf("op %d: after the re-run %d files, manifest equal %v", i, len(final.files), bytes.Equal(final.manifest, after.manifest))
		}
		for key, b := range final.files {
			if !bytes.Equal(b, after.files[key]) {
				t.Fatalf("op %d: after the re-run %s differs", i, key)
			}
		}
		if _, err := ffs.Mem().Stat(archivegen.StageRoot(disk)); err == nil {
			t.Fatalf("op %d: stage left after the re-run", i)
		}
		if tmp := temps(t, ffs.Mem(), disk); len(tmp) > 0 {
			t.Fatalf("op %d: temp files left: %v", i, tmp)
		}
	}
	// The loop must have crashed in each phase: while staging (re-run from
	// scratch), after the commit point (re-run completes), and between
	// moves (a partial listing, with its journal).
	if resumed == 0 || restarted == 0 || partial == 0 {
		t.Fatalf("over %d operations: %d re-runs completed a journal, %d started over, %d partial listings", ops, resumed, restarted, partial)
	}
	t.Logf("%d operations: %d re-runs completed a journal, %d started over, %d crashes left a partial listing", ops, resumed, restarted, partial)
}

// TestExtendPendingOtherBlocks: a journal of an extension by k blocks and a
// call asking for another number is refused before any write, naming the
// command that completes it.
func TestExtendPendingOtherBlocks(t *testing.T) {
	ctx := context.Background()
	disk := t.TempDir()
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: disk, Preset: chain.LastBlocksPreset(20), Seed: 3}); err != nil {
		t.Fatal(err)
	}
	base := vfs.NewCrashableMem()
	copyTree(t, disk, base)
	ffs := streamtest.NewFaultFSOver(disk, base)
	// Fail the first rename of a staged file: the journal is published.
	if _, err := ffs.Arm(`(ErrInjected (And Writes (PathMatch "_extend/v1.0/eth/blocks/*/part-*")))`); err != nil {
		t.Fatal(err)
	}
	if _, err := Extend(ctx, ffs.FS(), disk, 5); err == nil {
		t.Fatal("the armed rename did not fail")
	}
	ffs.Crash()
	snapshot := readState(t, ffs.Mem(), disk)
	_, err := Extend(ctx, ffs.FS(), disk, 6)
	if err == nil || !errcode.Is(err, CodeExtendPending) || !strings.Contains(err.Error(), "--blocks 5") {
		t.Fatalf("extend by 6 with a pending extension by 5: %v", err)
	}
	if got := readState(t, ffs.Mem(), disk); !bytes.Equal(got.manifest, snapshot.manifest) || !slices.Equal(keys(got.files), keys(snapshot.files)) {
		t.Fatal("the refused call changed the archive")
	}
	ext, err := Extend(ctx, ffs.FS(), disk, 5)
	if err != nil || !ext.Resumed {
		t.Fatalf("completing it: %+v, %v", ext, err)
	}
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
