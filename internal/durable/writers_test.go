package durable_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOneWriter keeps package durable the only durable writer: outside it,
// no non-test file of the module creates, links or renames a file, except
// the writers listed here, none of which publishes durable output.
func TestOneWriter(t *testing.T) {
	allowed := map[string]string{
		"chain/archivegen/archive.go:os.CreateTemp(": "a writability probe, removed at once",
		"cmd/ethstream/main.go:os.Create(":           "the --cpuprofile file of a debugging run",
		"demo/procmem.go:os.WriteFile(":              "/proc/self/clear_refs, not a file",
		"demo/demo.go:os.Create(":                    "a phase's log, streamed while the phase runs",
		"demo/bench_atscale_check.go:os.Link(":       "the at-scale bench's scratch copy of a checkpoint to repartition offline, hard links in a work directory it removes (bench support; the repartition writes through durable)",
		"internal/logtest/logtest.go:.Create(":       "the numbered log suite plants damaged and stray files to check that readers refuse them (test support, never in production)",
		"internal/streamtest/faultfs.go:.Create(":    "the test harness's fault FS forwards the call of the code under test to its in-memory FS (test support, never in production)",
		"internal/streamtest/faultfs.go:.Link(":      "the test harness's fault FS forwards the call of the code under test to its in-memory FS (test support, never in production)",
		"internal/streamtest/faultfs.go:.Rename(":    "the test harness's fault FS forwards the call of the code under test to its in-memory FS (test support, never in production)",
		"storage/mux.go:.Create(":                    "the store router forwards the call to the store of the path (durable.Local's own temp file)",
		"storage/mux.go:.Link(":                      "the store router forwards the call to the store of the path (durable.Local's own link)",
		"storage/mux.go:.Rename(":                    "the store router forwards the call to the store of the path (durable.Local's own rename)",
		"storage/spool.go:os.CreateTemp(":            "an S3 upload's staging file, unlinked at once; the object is published by the (conditional) PUT",
		"storage/s3test/tls.go:os.WriteFile(":        "the HTTPS test proxy's certificate for AWS_CA_BUNDLE, in the test's temp directory (test support, never in production)",
		"state/partitions.go:.Create(":               "the local Pebble cache (sstables to ingest, no-sync wrapper); trusted only via the marker, which is published through durable",
		"state/spill.go:.Create(":                    "a repartition's scratch sorted runs in the local cache, removed as merged and swept at Open; never read after a crash",
		"state/diskfull.go:.Create(":                 "the local Pebble cache's out-of-space watch (a wrapper of Pebble's own file creation)",
		"state/leanfs.go:.Create(":                   "the local Pebble cache's file system, which forwards Pebble's own file creation except for the files it leaves out",
		"state/leanfs.go:.Rename(":                   "the local Pebble cache's file system, which forwards Pebble's own renames except for the OPTIONS file it leaves out",
	}
	re := regexp.MustCompile(`os\.(WriteFile|CreateTemp|OpenFile|Create|Rename|Link)\(|\.(Rename|Link|Create)\(`)
	root := "../.."
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (rel == "internal/durable" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			for _, m := range re.FindAllString(line, -1) {
				key := rel + ":" + m
				if _, ok := allowed[key]; ok {
					seen[key] = true
					continue
				}
				t.Errorf("%s:%d writes a file without package durable: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range allowed {
		if !seen[k] {
			t.Errorf("allowed writer %s no longer exists: drop it from the list", k)
		}
	}
}
