package checkpoint

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/fixture"
)

// loadFixture copies fixture dir name (every file, byte for byte) into mfs
// at root and returns the relative paths copied, sorted.
func loadFixture(t *testing.T, mfs vfs.FS, name, root string) []string {
	t.Helper()
	src := fixture.Shared(t, "spark-checkpoints/"+name)
	var paths []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := mfs.PathJoin(root, filepath.ToSlash(rel))
		if d.IsDir() {
			return mfs.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := mfs.Create(dst, vfs.WriteCategoryUnspecified)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
		paths = append(paths, filepath.ToSlash(rel))
		return f.Close()
	})
	if err != nil {
		t.Fatalf("load fixture %s: %v", name, err)
	}
	sort.Strings(paths)
	return paths
}

// skipWithoutFixtures skips the test (fails it under CI=true) where the
// checkpoints Apache Spark wrote are absent.
func skipWithoutFixtures(t *testing.T) {
	t.Helper()
	fixture.Shared(t, "spark-checkpoints")
}

// TestSparkCheckpoints reads every file of the Spark fixtures (scenario in
// testdata/spark_checkpoints): the snapshot, each offsets entry, the file
// source log, the provider check, and how ours re-encodes what it read.
func TestSparkCheckpoints(t *testing.T) {
	skipWithoutFixtures(t)
	mfs := vfs.NewMem()
	const root = "/ck"
	datadriven.RunTest(t, "testdata/spark_checkpoints", func(t *testing.T, d *datadriven.TestData) string {
		path := root
		d.MaybeScanArgs(t, "path", &path)
		dir := Dir{FS: mfs, Path: path}
		switch d.Cmd {
		case "load":
			var name string
			d.ScanArgs(t, "fixture", &name)
			mfs = vfs.NewMem()
			return strings.Join(loadFixture(t, mfs, name, root), "\n") + "\n"
		case "mkdir":
			if err := mfs.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			return ""
		case "exists":
			return fmt.Sprintln(dir.Exists())
		case "snapshot":
			s, err := dir.ReadExisting()
			if err != nil {
				return errText(err)
			}
			return formatSnapshot(t, dir, s)
		case "provider":
			s, err := dir.ReadSnapshot()
			if err != nil {
				return errText(err)
			}
			class, recorded := s.Latest.StateProvider()
			return fmt.Sprintf("%s (recorded: %t)\n%s", class, recorded, errText(s.CheckStateProvider()))
		case "offsets":
			var file string
			d.ScanArgs(t, "file", &file)
			data, err := ReadFile(mfs, mfs.PathJoin(root, file))
			if err != nil {
				t.Fatal(err)
			}
			e, err := ParseOffsets(file, data)
			if err != nil {
				return errText(err)
			}
			out := formatEntry(e)
			// Read under Spark's rules too, and re-encode with our writer.
			agreeWithSpark(t, data, e)
			enc, err := EncodeOffsets(e)
			if err != nil {
				t.Fatal(err)
			}
			agreeWithSpark(t, enc, e)
			if string(enc) == string(data) {
				out += "re-encoded: byte-identical\n"
			} else {
				out += fmt.Sprintf("re-encoded: %q\n", enc)
			}
			return out
		case "file-source-log":
			l, err := ReadFileSourceLog(mfs, path)
			if err != nil {
				return errText(err)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "latest id %d, compacted id %d, %d files\n", l.LatestID, l.CompactID, len(l.Entries))
			for _, e := range l.Entries {
				fmt.Fprintf(&b, "  batch %d  %s  %d\n", e.BatchID, e.Path, e.Timestamp)
			}
			return b.String()
		case "lock":
			w, err := Lock(mfs, path)
			if err != nil {
				return errText(err)
			}
			return errText(w.Close())
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

func errText(err error) string {
	if err == nil {
		return "ok\n"
	}
	if c := errcode.Code(err); c != "" {
		return "error: " + err.Error() + "\n"
	}
	return "error (no code): " + err.Error() + "\n"
}

func formatSnapshot(t *testing.T, d Dir, s *Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "query id: %s\n", s.Metadata.ID)
	offs, err := d.ListOffsets()
	if err != nil {
		t.Fatal(err)
	}
	commits, err := d.ListCommits()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "offsets: %s\ncommits: %s\n", ids(offs), ids(commits))
	fmt.Fprintf(&b, "latest %d, committed %d\n", s.LatestID, s.CommittedID)
	for _, id := range offs {
		e, err := d.ReadOffsets(id)
		if err != nil {
			return b.String() + errText(err)
		}
		fmt.Fprintf(&b, "offsets/%d: %s", id, formatEntry(e))
	}
	return b.String()
}

func ids(xs []int64) string {
	if len(xs) == 0 {
		return "none"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, " ")
}

func formatEntry(e *OffsetEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "v%d batchWatermarkMs=%d batchTimestampMs=%d\n", e.Version, e.Metadata.BatchWatermarkMs, e.Metadata.BatchTimestampMs)
	for _, k := range slices.Sorted(maps.Keys(e.Metadata.Conf)) {
		fmt.Fprintf(&b, "  conf %s=%s\n", k, e.Metadata.Conf[k])
	}
	for _, k := range PinnedConfs {
		if v, recorded := ConfValue(e.Metadata.Conf, k); !recorded {
			fmt.Fprintf(&b, "  conf %s=%s (not recorded: default)\n", k, v)
		}
	}
	for _, s := range e.Sources {
		off := "-"
		if s.Offset != nil {
			off = string(s.Offset)
		}
		fmt.Fprintf(&b, "  source %s: %s\n", s.Key, off)
	}
	return b.String()
}
