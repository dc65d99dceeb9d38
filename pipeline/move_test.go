package pipeline

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/storage/s3test"
)

// A relocated archive (issue 27.3): the reference query reads a local
// archive, the archive moves (mv, a copy to S3), and the query resumes at
// the new location when the source is told movedFrom: every file its log
// records must be there with the logged size, else SOURCE_LOCATION_CHANGED
// and the checkpoint and table stay byte-identical.

// archiveLoc is the s3archive location of an archive copied to root.
func archiveLoc(root string) string { return "file://" + filepath.ToSlash(root) + "/v1.0/eth/blocks" }

// movedURI is the source URI at loc (a location, or a URI with a query)
// told it moved from old ("": not told).
func movedURI(loc, old string) string {
	uri := loc
	if !strings.Contains(uri, "?") {
		uri += "?maxFilesPerTrigger=1"
	}
	if old != "" {
		uri += "&movedFrom=" + url.QueryEscape(old)
	}
	return uri
}

// runMoved runs the query on dir's checkpoint and table reading uri, at
// most max batches (0: all), and returns how many data batches it ran.
func runMoved(t *testing.T, dir, uri string, max int) (int, error) {
	t.Helper()
	cfg := s3Config(filepath.Join(dir, "ck"), filepath.Join(dir, "table"), filepath.Join(dir, "cache"), uri)
	cfg.MaxBatches = max
	sum, err := Run(context.Background(), cfg)
	if sum == nil {
		return 0, err
	}
	return sum.DataBatches, err
}

// firstBlockFile is the archive's first block file (by date): the one the
// first batch admitted.
func firstBlockFile(t *testing.T, root string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "v1.0", "eth", "blocks", "date=*", "*.parquet"))
	if err != nil || len(files) < 2 {
		t.Fatalf("archive %s has %d block files: %v", root, len(files), err)
	}
	sort.Strings(files)
	return files[0]
}

// startArchive copies the archive to dir/a and runs its first batch there.
func startArchive(t *testing.T, dir string) (a string, want map[windowKey]int64) {
	t.Helper()
	a = filepath.Join(dir, "a")
	copyTree(t, mustArchive(t), a)
	want = recount(t, a)
	if n, err := runMoved(t, dir, movedURI(archiveLoc(a), ""), 1); err != nil || n != 1 {
		t.Fatalf("first run: %d batches, %v", n, err)
	}
	return a, want
}

// TestMovedArchive: mv A B; without movedFrom the start is refused, with a
// logged file missing or of another size too, each leaving the checkpoint
// and the table byte-identical; with movedFrom=A it resumes and reads only
// the file not yet read (the table equals the recount); the next start
// needs no option; and B moves on to C.
func TestMovedArchive(t *testing.T) {
	dir := t.TempDir()
	a, want := startArchive(t, dir)
	b := filepath.Join(dir, "b")
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	ck, table := filepath.Join(dir, "ck"), filepath.Join(dir, "table")
	before := treeHash(t, ck, table)
	missing, other := filepath.Join(dir, "missing"), filepath.Join(dir, "other")
	copyTree(t, b, missing)
	copyTree(t, b, other)
	if err := os.Remove(firstBlockFile(t, missing)); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(firstBlockFile(t, other), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct{ name, uri, want string }{
		{"not told", movedURI(archiveLoc(b), ""), "movedFrom=" + archiveLoc(a)},
		{"a logged file missing", movedURI(archiveLoc(missing), archiveLoc(a)), "is not at " + archiveLoc(missing)},
		{"a logged file of another size", movedURI(archiveLoc(other), archiveLoc(a)), "bytes where the logged file"},
	} {
		_, err := runMoved(t, dir, tc.uri, 0)
		if errcode.Code(err) != errcode.SourceLocationChanged || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want SOURCE_LOCATION_CHANGED with %q", tc.name, err, tc.want)
		}
		if treeHash(t, ck, table) != before {
			t.Fatalf("%s: the refused start changed the checkpoint or the table", tc.name)
		}
	}
	if n, err := runMoved(t, dir, movedURI(archiveLoc(b), archiveLoc(a)), 0); err != nil || n != 1 {
		t.Fatalf("resume at B: %d batches (want 1: the file not read yet), %v", n, err)
	}
	if d := diffCounts(want, locTableCounts(t, table)); d != "" {
		t.Fatalf("after the move: %s", d)
	}
	if n, err := runMoved(t, dir, movedURI(archiveLoc(b), ""), 0); err != nil || n != 0 {
		t.Fatalf("the next start at B without movedFrom: %d batches, %v", n, err)
	}
	c := filepath.Join(dir, "c")
	if err := os.Rename(b, c); err != nil {
		t.Fatal(err)
	}
	if n, err := runMoved(t, dir, movedURI(archiveLoc(c), archiveLoc(b)), 0); err != nil || n != 0 {
		t.Fatalf("B -> C: %d batches, %v", n, err)
	}
	if n, err := runMoved(t, dir, movedURI(archiveLoc(c), ""), 0); err != nil || n != 0 {
		t.Fatalf("the next start at C: %d batches, %v", n, err)
	}
	if d := diffCounts(want, locTableCounts(t, table)); d != "" {
		t.Fatalf("after A -> B -> C: %s", d)
	}
	for _, n := range []string{"0", "1"} {
		if _, err := os.Stat(filepath.Join(ck, "sources", flSource, "moves", n)); err != nil {
			t.Fatalf("move record %s: %v", n, err)
		}
	}
}

// TestMovedArchiveToS3: the archive is copied from the local disk to the
// embedded S3 endpoint and the local copy deleted; told movedFrom, the
// query resumes from S3, reads only the file not read yet, and its table
// equals the recount; then the archive moves to another prefix.
func TestMovedArchiveToS3(t *testing.T) {
	dir := t.TempDir()
	a, want := startArchive(t, dir)
	srv := s3test.Embedded(t)
	uri := uploadArchive(t, srv, srv, "mirror")
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	if n, err := runMoved(t, dir, movedURI(uri, archiveLoc(a)), 0); err != nil || n != 1 {
		t.Fatalf("resume on S3: %d batches (want 1), %v", n, err)
	}
	if d := diffCounts(want, locTableCounts(t, filepath.Join(dir, "table"))); d != "" {
		t.Fatalf("after the move to S3: %s", d)
	}
	if n, err := runMoved(t, dir, movedURI(uri, ""), 0); err != nil || n != 0 {
		t.Fatalf("the next start on S3 without movedFrom: %d batches, %v", n, err)
	}
	// Then to another prefix of the bucket (a mirror on the same server).
	uri2 := uploadArchive(t, srv, srv, "mirror2")
	old, _ := SourceLocation(uri)
	if n, err := runMoved(t, dir, movedURI(uri2, old), 0); err != nil || n != 0 {
		t.Fatalf("s3 prefix -> s3 prefix: %d batches, %v", n, err)
	}
	if d := diffCounts(want, locTableCounts(t, filepath.Join(dir, "table"))); d != "" {
		t.Fatalf("after the move to another prefix: %s", d)
	}
}
