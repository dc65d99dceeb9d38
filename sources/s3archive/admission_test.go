package s3archive

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestAdmission60Days is the demo's backfill shape: 60 daily files with
// maxFilesPerTrigger 5 are admitted in 12 steps, then there is no new data;
// the batches together read every row once, in date order.
func TestAdmission60Days(t *testing.T) {
	root := t.TempDir()
	want := writeDays(t, root, day0, 60, 5, "modern")
	fs := vfs.NewMem()
	o := Options{URI: fileURI(filepath.Join(root, "v1.0/eth/blocks")), MaxFilesPerTrigger: 5}
	s := openSource(t, o, testEnv(t, fs))
	var start stream.Offset
	var got []block
	steps := 0
	for {
		end, err := s.LatestOffset(t.Context(), start)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(end, start) {
			break
		}
		steps++
		if want := off(int64(steps - 1)); !bytes.Equal(end, want) {
			t.Fatalf("step %d: offset %s, want %s", steps, end, want)
		}
		rows := collect(t, s, start, end)
		if len(rows) != 25 {
			t.Fatalf("step %d read %d rows, want 25 (5 files)", steps, len(rows))
		}
		got = append(got, rows...)
		start = end
	}
	if steps != 12 {
		t.Fatalf("%d LatestOffset steps, want 12", steps)
	}
	blocksEqual(t, got, want)
	// Log files: 0..11, with 9 compacted.
	names, err := fs.List(s.env.MetadataDir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "0 1 10 11 2 3 4 5 6 7 8 9.compact" {
		t.Fatalf("log files %v", names)
	}
	es, err := s.log.Read(9)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 50 || es[0].BatchID != 0 || es[49].BatchID != 9 {
		t.Fatalf("compact file holds %d entries (%+v...)", len(es), es[0])
	}
	if m := s.Metrics(); m["filesRead"] != "60" || m["rowsRead"] != "300" || m["filesAdmitted"] != "60" {
		t.Fatalf("metrics %v", m)
	}
	if r := s.ReportLatestOffset(); !bytes.Equal(r, off(11)) {
		t.Fatalf("ReportLatestOffset %s", r)
	}
}

// TestRestartResumes: a new Source over the same metadata directory resumes
// at the next file; files already admitted are never admitted again, and
// files that appear later are picked up.
func TestRestartResumes(t *testing.T) {
	root := t.TempDir()
	want := writeDays(t, root, day0, 23, 3, "int96")
	fs := vfs.NewMem()
	o := Options{URI: fileURI(root), MaxFilesPerTrigger: 5}
	var start stream.Offset
	var got []block
	// Each "run" plans at most 2 batches, then the process "restarts".
	for run := 0; run < 10; run++ {
		s := openSource(t, o, testEnv(t, fs))
		for range 2 {
			end, err := s.LatestOffset(t.Context(), start)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(end, start) {
				break
			}
			got = append(got, collect(t, s, start, end)...)
			start = end
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if run == 2 {
			// New days arrive while the backfill is running.
			want = append(want, writeDays(t, root, day0.AddDate(0, 0, 23), 4, 3, "int96")...)
		}
	}
	blocksEqual(t, got, want)
	if !bytes.Equal(start, off(5)) { // 27 files / 5 = 6 log entries
		t.Fatalf("final offset %s", start)
	}
}

// TestCrashAfterLogWrite: the previous run wrote log entry n and crashed
// before the engine recorded the batch. LatestOffset for the same start
// re-uses n (same files), even though more files exist now and the limit
// changed, and then continues with n+1.
func TestCrashAfterLogWrite(t *testing.T) {
	root := t.TempDir()
	writeDays(t, root, day0, 12, 2, "modern")
	fs := vfs.NewMem()
	s := openSource(t, Options{URI: fileURI(root), MaxFilesPerTrigger: 5}, testEnv(t, fs))
	e0, err := s.LatestOffset(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := s.LatestOffset(t.Context(), e0)
	if err != nil {
		t.Fatal(err)
	}
	before := collect(t, s, e0, e1)
	// Crash: offsets/N only recorded e0. Restart with another limit.
	writeDays(t, root, day0.AddDate(0, 0, 12), 3, 2, "modern")
	s2 := openSource(t, Options{URI: fileURI(root), MaxFilesPerTrigger: 2}, testEnv(t, fs))
	for range 2 { // repeated calls are idempotent too
		again, err := s2.LatestOffset(t.Context(), e0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, e1) {
			t.Fatalf("re-planned offset %s, want re-used %s", again, e1)
		}
	}
	blocksEqual(t, collect(t, s2, e0, e1), before)
	e2, err := s2.LatestOffset(t.Context(), e1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e2, off(2)) {
		t.Fatalf("next offset %s", e2)
	}
	if n := len(collect(t, s2, e1, e2)); n != 4 { // the new limit: 2 files of 2 rows
		t.Fatalf("batch after the re-used one read %d rows, want 4", n)
	}
}

// TestDeterministicReadBatch: the same (start, end] yields the same rows in
// the same chunks whatever the parallelism, and after a restart.
func TestDeterministicReadBatch(t *testing.T) {
	root := t.TempDir()
	for d, era := range []string{"modern", "int96", "decimal", "nanos", "seconds", "modern"} {
		day := day0.AddDate(0, 0, d)
		for part := range 3 {
			bs := genBlocks(int64(d*1000+part*100), 50+part, day)
			writeEra(t, dayPath(root, day, part), era, bs)
		}
	}
	fs := vfs.NewMem()
	s := openSource(t, Options{URI: fileURI(root)}, testEnv(t, fs))
	end, err := s.LatestOffset(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := collect(t, s, nil, end)
	if len(ref) != 6*(50+51+52) {
		t.Fatalf("read %d rows", len(ref))
	}
	for _, p := range []int{1, 3, 8} {
		s2 := openSource(t, Options{URI: fileURI(root), Parallelism: p}, testEnv(t, fs))
		blocksEqual(t, collect(t, s2, nil, end), ref)
	}
}

// TestAvailableNow: files arriving after PrepareAvailableNow are not admitted.
func TestAvailableNow(t *testing.T) {
	root := t.TempDir()
	writeDays(t, root, day0, 7, 2, "modern")
	s := openSource(t, Options{URI: fileURI(root), MaxFilesPerTrigger: 3}, testEnv(t, vfs.NewMem()))
	if err := s.PrepareAvailableNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	writeDays(t, root, day0.AddDate(0, 0, 7), 2, 2, "modern")
	var start stream.Offset
	files := 0
	for {
		req := s.m.requests.Load()
		end, err := s.LatestOffset(t.Context(), start)
		if err != nil {
			t.Fatal(err)
		}
		// The triggers admit from the snapshot: no listing after the first.
		if n := s.m.requests.Load() - req; n != 0 {
			t.Fatalf("LatestOffset after PrepareAvailableNow made %d store requests, want 0", n)
		}
		if bytes.Equal(end, start) {
			break
		}
		files += len(collect(t, s, start, end)) / 2
		start = end
	}
	if files != 7 || !bytes.Equal(start, off(2)) {
		t.Fatalf("availableNow read %d files up to %s, want 7 up to logOffset 2", files, start)
	}
}

// TestMaxBytesPerTrigger admits files while their total fits, at least one.
func TestMaxBytesPerTrigger(t *testing.T) {
	root := t.TempDir()
	writeDays(t, root, day0, 6, 20, "modern")
	objs, err := (&localStore{fs: vfs.Default, root: root, m: &metrics{}}).list(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	size := objs[0].Size
	s := openSource(t, Options{URI: fileURI(root), MaxBytesPerTrigger: 2*size + size/2}, testEnv(t, vfs.NewMem()))
	var start stream.Offset
	var per []int
	for {
		end, err := s.LatestOffset(t.Context(), start)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(end, start) {
			break
		}
		per = append(per, len(collect(t, s, start, end))/20)
		start = end
	}
	if fmt.Sprint(per) != "[2 2 2]" {
		t.Fatalf("files per trigger %v, want [2 2 2]", per)
	}
}

// TestLogOnDisk checks the exact bytes of a log file (Spark's format, with
// the additive size of each file).
func TestLogOnDisk(t *testing.T) {
	root := t.TempDir()
	writeDays(t, root, day0, 2, 1, "modern")
	fs := vfs.NewMem()
	s := openSource(t, Options{URI: fileURI(root)}, testEnv(t, fs))
	if _, err := s.LatestOffset(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(s.log.FileName(0))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := new(bytes.Buffer)
	if _, err := buf.ReadFrom(f); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if len(lines) != 3 || lines[0] != "v1" {
		t.Fatalf("log file:\n%s", buf)
	}
	for i, l := range lines[1:] {
		p := dayPath(root, day0.AddDate(0, 0, i), 0)
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		prefix := `{"path":"` + fileURI(p) + `","timestamp":`
		if !strings.HasPrefix(l, prefix) || !strings.HasSuffix(l, `,"batchId":0,"size":`+strconv.FormatInt(info.Size(), 10)+`}`) {
			t.Fatalf("line %q, want %s...", l, prefix)
		}
	}
}

// TestCorruptLog: every damaged log is CHECKPOINT_CORRUPT naming the file.
func TestCorruptLog(t *testing.T) {
	root := t.TempDir()
	writeDays(t, root, day0, 3, 1, "modern")
	entry := `{"path":"file:///x/date=2026-08-01/a.parquet","timestamp":1,"batchId":0}`
	cases := []struct {
		name, file, content string
	}{
		{"empty", "0", ""},
		{"no-version", "0", entry},
		{"future-version", "0", "v2\n" + entry},
		{"no-entries", "0", "v1"},
		{"bad-json", "0", "v1\n{\"path\":"},
		{"missing-field", "0", "v1\n{\"path\":\"file:///a.parquet\",\"batchId\":0}"},
		{"wrong-batch", "0", "v1\n" + strings.Replace(entry, `"batchId":0`, `"batchId":3`, 1)},
		{"foreign-file", "zz", "v1\n" + entry},
		{"gap", "1", "v1\n" + strings.Replace(entry, `"batchId":0`, `"batchId":1`, 1)},
		{"uncompacted-9", "9", "v1\n" + entry},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			env := testEnv(t, fs)
			f, err := fs.Create(fs.PathJoin(env.MetadataDir, c.file), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte(c.content)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			s, err := New(withBlocks(Options{URI: fileURI(root)}))
			if err != nil {
				t.Fatal(err)
			}
			err = s.Open(t.Context(), env)
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("got %v, want %s", err, errcode.CheckpointCorrupt)
			}
			var e *errcode.Error
			if !errorsAs(err, &e) || !strings.HasPrefix(e.Path, env.MetadataDir) {
				t.Fatalf("error does not name the log: %v", err)
			}
		})
	}
	// A committed offset beyond the log means log files were lost.
	fs := vfs.NewMem()
	env := testEnv(t, fs)
	env.Committed = off(4)
	s, _ := New(withBlocks(Options{URI: fileURI(root)}))
	if err := s.Open(t.Context(), env); !errcode.Is(err, errcode.CheckpointCorrupt) {
		t.Fatalf("got %v, want %s", err, errcode.CheckpointCorrupt)
	}
}

// TestStaleTempRemoved: a temp file left by a crash is ignored and removed.
func TestStaleTempRemoved(t *testing.T) {
	root := t.TempDir()
	writeDays(t, root, day0, 2, 1, "modern")
	fs := vfs.NewMem()
	env := testEnv(t, fs)
	f, _ := fs.Create(fs.PathJoin(env.MetadataDir, ".0.tmp"), vfs.WriteCategoryUnspecified)
	f.Write([]byte("v1\n{"))
	f.Close()
	s := openSource(t, Options{URI: fileURI(root)}, env)
	end, err := s.LatestOffset(t.Context(), nil)
	if err != nil || !bytes.Equal(end, off(0)) {
		t.Fatalf("LatestOffset = %s, %v", end, err)
	}
	names, _ := fs.List(env.MetadataDir)
	if strings.Join(names, " ") != "0" {
		t.Fatalf("log dir holds %v", names)
	}
}

// TestCrashDuringLogWrite fails the i-th file-system operation of admitting
// log entry 0, for every i, then "crashes" (keeping only synced data) and
// restarts: the restart admits the same files as entry 0, or re-uses the
// published entry, and no temp file is left behind.
func TestCrashDuringLogWrite(t *testing.T) {
	root := t.TempDir()
	writeDays(t, root, day0, 4, 1, "modern")
	o := Options{URI: fileURI(root), MaxFilesPerTrigger: 3}
	for i := int32(0); ; i++ {
		mem := vfs.NewCrashableMem()
		env := testEnv(t, mem)
		for _, d := range []string{"/", "/ckpt", "/ckpt/sources", env.MetadataDir} {
			f, err := mem.OpenDir(d)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		faults := streamtest.NewFaultFSOver("/", mem)
		if _, err := faults.Arm(fmt.Sprintf("(ErrInjected (OnIndex %d))", i)); err != nil {
			t.Fatal(err)
		}
		env.FS = faults.FS()
		s, err := New(withBlocks(o))
		if err != nil {
			t.Fatal(err)
		}
		injected := s.Open(t.Context(), env)
		if injected == nil {
			_, injected = s.LatestOffset(t.Context(), nil)
		}
		env.FS = mem.CrashClone(vfs.CrashCloneCfg{})
		s2 := openSource(t, o, env)
		end, err := s2.LatestOffset(t.Context(), nil)
		if err != nil {
			t.Fatalf("op %d: restart: %v", i, err)
		}
		if !bytes.Equal(end, off(0)) || len(collect(t, s2, nil, end)) != 3 {
			t.Fatalf("op %d: after crash: offset %s", i, end)
		}
		names, _ := env.FS.List(env.MetadataDir)
		if strings.Join(names, " ") != "0" {
			t.Fatalf("op %d: log dir holds %v", i, names)
		}
		if injected == nil {
			if i < 5 {
				t.Fatalf("only %d operations to admit a set", i)
			}
			return
		}
	}
}

// TestSortObjects: date partition first, then name, whatever the listing order.
func TestSortObjects(t *testing.T) {
	objs := []object{
		{URI: "s3://b/p/date=2026-01-02/part-0.parquet"},
		{URI: "s3://b/p/date=2025-12-31/part-1.parquet"},
		{URI: "s3://b/p/date=2026-01-02/part-00.parquet"},
		{URI: "s3://b/p/zz/date=2025-12-31/part-0.parquet"},
		{URI: "s3://b/p/undated.parquet"},
	}
	sortObjects(objs)
	var got []string
	for _, o := range objs {
		got = append(got, strings.TrimPrefix(o.URI, "s3://b/p/"))
	}
	want := "undated.parquet date=2025-12-31/part-1.parquet zz/date=2025-12-31/part-0.parquet date=2026-01-02/part-0.parquet date=2026-01-02/part-00.parquet"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v", got)
	}
}
