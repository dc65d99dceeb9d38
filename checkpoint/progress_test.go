package checkpoint

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// progressLines reads the whole progress log of ck, in order.
func progressLines(t *testing.T, fs vfs.FS, ck string) (lines []string, segs []ProgressSegment) {
	t.Helper()
	segs, err := Dir{FS: fs, Path: ck}.ProgressSegments()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		b, err := ReadFile(fs, s.Path)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != s.Size {
			t.Fatalf("%s: %d bytes, listed %d", s.Path, len(b), s.Size)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
	}
	return lines, segs
}

// TestProgressSegments: appends go to segments of at most
// ProgressSegmentBytes, in order, across writers; the oldest are deleted
// once the newer hold ProgressRetainBytes; what is kept is the newest
// events, complete and in order.
func TestProgressSegments(t *testing.T) {
	fs := vfs.NewMem()
	// A format 1 file from an earlier version is read first.
	if err := fs.MkdirAll("/ck", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := AppendLine(fs, "/ck/"+ProgressFile, []byte("legacy")); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 3000)
	next := 0
	appendN := func(n int) {
		w, err := Lock(fs, "/ck")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for range n {
			if err := w.AppendProgress(fmt.Appendf(nil, "%06d %s", next, pad)); err != nil {
				t.Fatal(err)
			}
			next++
		}
	}
	appendN(10)
	lines, segs := progressLines(t, fs, "/ck")
	if len(lines) != 11 || lines[0] != "legacy" || len(segs) != 2 || segs[0].Seq != -1 || segs[1].Seq != 0 {
		t.Fatalf("after 10 appends: %d lines, segments %+v", len(lines), segs)
	}
	// Later writers continue the newest segment, then roll over and retain.
	for range 30 {
		appendN(100)
	}
	lines, segs = progressLines(t, fs, "/ck")
	var total int64
	for i, s := range segs {
		if s.Seq < 0 || s.Size > ProgressSegmentBytes {
			t.Fatalf("segment %+v: the format 1 file survived or a segment is over %d bytes", s, ProgressSegmentBytes)
		}
		if i > 0 && s.Seq != segs[i-1].Seq+1 {
			t.Fatalf("segments not consecutive: %+v", segs)
		}
		total += s.Size
	}
	if total < ProgressRetainBytes || total-segs[0].Size >= ProgressRetainBytes+ProgressSegmentBytes {
		t.Fatalf("retained %d bytes in %d segments, want about %d", total, len(segs), ProgressRetainBytes)
	}
	first := next - len(lines)
	for i, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprintf("%06d ", first+i)) {
			t.Fatalf("line %d = %.10q, want event %d", i, l, first+i)
		}
	}
	if lines[len(lines)-1][:6] != fmt.Sprintf("%06d", next-1) {
		t.Fatal("the newest event is missing")
	}
}

// TestProgressTornSegment: a segment whose last line was torn by a crash
// is never appended to; the next writer starts a new segment, so the torn
// line stays a final line that readers skip.
func TestProgressTornSegment(t *testing.T) {
	fs := vfs.NewMem()
	w, err := Lock(fs, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AppendProgress([]byte(`{"batchId":0}`)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	seg0 := "/ck/" + ProgressDir + "/" + ProgressSegmentName(0)
	f, err := fs.OpenReadWrite(seg0, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt([]byte(`{"batchId":1,"tor`), st.Size()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	w, err = Lock(fs, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.AppendProgress([]byte(`{"batchId":1}`)); err != nil {
		t.Fatal(err)
	}
	b, _ := ReadFile(fs, "/ck/"+ProgressDir+"/"+ProgressSegmentName(1))
	if !bytes.Equal(b, []byte("{\"batchId\":1}\n")) {
		t.Fatalf("segment 1 = %q", b)
	}
}
