package s3archive

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/fixture"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/storage/s3test"
	"github.com/ethstream/ethstream/stream"
)

// oracleBound is the prune bound by its definition: the newest compaction id
// below cur+1-retain, -1 when Spark would not prune yet (interval >
// cur+1-retain).
func oracleBound(cur, retain, interval int64) int64 {
	if interval > cur+1-retain {
		return -1
	}
	for j := cur - retain; j >= 0; j-- {
		if (j+1)%interval == 0 {
			return j
		}
	}
	return -1
}

func entriesOf(id int64) []logEntry {
	n := 1 + int(id%3)
	out := make([]logEntry, n)
	for i := range out {
		out[i] = logEntry{Path: fmt.Sprintf("s3://b/date=x/%d-%d.parquet", id, i), Timestamp: id*1000 + int64(i), BatchID: id}
	}
	return out
}

// TestPruneBounded writes 600 log ids under several retentions and checks,
// against the definition, that exactly the ids from the bound on have files
// (so the count stays at most retain + interval), that a reopened log reads
// every entry ever admitted, and that every id, pruned or not, still yields
// its own entries.
func TestPruneBounded(t *testing.T) {
	for _, retain := range []int64{1, 3, 10, 25, 100} {
		t.Run(fmt.Sprint("retain=", retain), func(t *testing.T) {
			fs := vfs.NewMem()
			l := newFileLog(fs, "/src", retain)
			if _, _, err := l.Scan(); err != nil {
				t.Fatal(err)
			}
			var all []logEntry
			bound := int64(-1)
			for cur := int64(0); cur < 600; cur++ {
				es := entriesOf(cur)
				toWrite := es
				if isCompactID(cur, l.Interval()) {
					toWrite = append(slices.Clone(all), es...)
				}
				if err := l.Write(cur, toWrite); err != nil {
					t.Fatal(err)
				}
				all = append(all, es...)
				if _, err := l.Prune(cur); err != nil {
					t.Fatal(err)
				}
				bound = max(bound, oracleBound(cur, retain, defaultCompactInterval))
				var want []string
				for id := max(bound, 0); id <= cur; id++ {
					want = append(want, l.FS.PathBase(l.FileName(id)))
				}
				got := logNames(t, fs, "/src")
				if !slices.Equal(got, want) {
					t.Fatalf("after id %d: files %v, want %v", cur, got, want)
				}
				if n := int64(len(got)); n > retain+defaultCompactInterval {
					t.Fatalf("after id %d: %d files, more than retain+interval", cur, n)
				}
				if cur%37 != 0 && cur != 599 {
					continue
				}
				// A restart: a new log over the directory.
				r := newFileLog(fs, "/src", retain)
				first, next, err := r.Scan()
				if err != nil {
					t.Fatal(err)
				}
				// The interval is re-derived (Spark's rule); it must keep the
				// newest compact file a compaction id.
				if next != cur+1 || (r.LatestCompact() >= 0 && (r.LatestCompact()+1)%r.Interval() != 0) {
					t.Fatalf("after id %d: reopened next %d interval %d", cur, next, r.Interval())
				}
				var read []logEntry
				for id := first; id < next; id++ {
					es, err := r.Read(id)
					if err != nil {
						t.Fatal(err)
					}
					read = append(read, es...)
				}
				if !reflect.DeepEqual(read, all) {
					t.Fatalf("after id %d: reopened log holds %d entries, want %d", cur, len(read), len(all))
				}
				for id := int64(0); id <= cur; id++ {
					es, err := r.Batch(id, read)
					if err != nil {
						t.Fatalf("after id %d: batch %d: %v", cur, id, err)
					}
					if !reflect.DeepEqual(es, entriesOf(id)) {
						t.Fatalf("after id %d: batch %d holds %v", cur, id, es)
					}
				}
			}
		})
	}
}

// TestPruneCrashLoop fails the i-th file-system operation of admitting the
// log id whose prune deletes the oldest files, for every i, then crashes
// (only synced data survives) and restarts: the restart reads every entry
// admitted, re-admits nothing, and the next admissions leave exactly the
// files of a log that never crashed.
func TestPruneCrashLoop(t *testing.T) {
	root := t.TempDir()
	want := writeDays(t, root, day0, 22, 1, "modern")
	o := Options{URI: fileURI(root), MaxFilesPerTrigger: 1}
	base := vfs.NewCrashableMem()
	env := testEnv(t, base)
	env.MinBatchesToRetain = 5
	for _, d := range []string{"/", "/ckpt", "/ckpt/sources", env.MetadataDir} {
		f, err := base.OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	s := openSource(t, o, env)
	var start stream.Offset
	for range 14 { // ids 0..13: nothing pruned yet
		end, err := s.LatestOffset(t.Context(), start)
		if err != nil {
			t.Fatal(err)
		}
		start = end
	}
	if n := len(logNames(t, base, env.MetadataDir)); n != 14 {
		t.Fatalf("%d files before the prune", n)
	}
	for i := int32(0); ; i++ {
		mem := base.CrashClone(vfs.CrashCloneCfg{})
		faults := streamtest.NewFaultFSOver("/", mem)
		if _, err := faults.Arm(fmt.Sprintf("(ErrInjected (OnIndex %d))", i)); err != nil {
			t.Fatal(err)
		}
		e := env
		e.FS = faults.FS()
		s, err := New(withBlocks(o))
		if err != nil {
			t.Fatal(err)
		}
		injected := s.Open(t.Context(), e)
		var end stream.Offset
		if injected == nil {
			end, injected = s.LatestOffset(t.Context(), off(13))
		}
		// A failed delete is logged, not returned: detect it by the count.
		fired := faults.Injected() > 0
		e.FS = mem.CrashClone(vfs.CrashCloneCfg{})
		s2 := openSource(t, o, e)
		if len(s2.seen) != 14 && len(s2.seen) != 15 {
			t.Fatalf("op %d: restart sees %d files", i, len(s2.seen))
		}
		if injected == nil && !bytes.Equal(end, off(14)) {
			t.Fatalf("op %d: admitted %s", i, end)
		}
		start := off(13)
		for id := int64(14); id < 22; id++ {
			end, err := s2.LatestOffset(t.Context(), start)
			if err != nil {
				t.Fatalf("op %d: id %d: %v", i, id, err)
			}
			if !bytes.Equal(end, off(id)) {
				t.Fatalf("op %d: id %d admitted as %s", i, id, end)
			}
			start = end
		}
		// Ids 9..21 remain (bound 9 at id 21), as if nothing had crashed;
		// every batch reads its day.
		if got, want := strings.Join(logNames(t, e.FS, e.MetadataDir), " "), "9.compact 10 11 12 13 14 15 16 17 18 19.compact 20 21"; got != want {
			t.Fatalf("op %d: files %s, want %s", i, got, want)
		}
		got := collect(t, s2, nil, off(21))
		blocksEqual(t, got, want)
		if !fired {
			if i < 10 {
				t.Fatalf("only %d operations to admit and prune", i)
			}
			return
		}
	}
}

// TestSparkWrittenLog opens a source on the log Spark wrote: the interval
// (3) is derived from 2.compact as Spark does, every entry is seen, each id
// yields its own files (0..2 from 2.compact), and the log continues in
// Spark's layout: 5.compact holding every entry, then pruning from it.
func TestSparkWrittenLog(t *testing.T) {
	// The FileStreamSource log Apache Spark 2.1.0 wrote: 2.compact, 3, 4,
	// compaction interval 3.
	sparkFileSourceLog := fixture.Shared(t, "spark-checkpoints/file-source-log-version-2.1.0")
	fs := vfs.NewMem()
	env := testEnv(t, fs)
	env.MinBatchesToRetain = 1
	for _, name := range []string{"2.compact", "3", "4"} {
		data, err := os.ReadFile(filepath.Join(sparkFileSourceLog, name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(fs.PathJoin(env.MetadataDir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	env.Committed = off(4)
	root := t.TempDir()
	o := Options{URI: fileURI(root), MaxFilesPerTrigger: 1}
	s := openSource(t, o, env)
	if s.nextID != 5 || s.log.Interval() != 3 || len(s.entries) != 5 {
		t.Fatalf("next id %d, interval %d, %d entries", s.nextID, s.log.Interval(), len(s.entries))
	}
	for id := int64(0); id < 5; id++ {
		es, err := s.log.Batch(id, s.entries)
		if err != nil {
			t.Fatal(err)
		}
		want := []logEntry{{Path: fmt.Sprintf("/a/b/%d", id), Timestamp: es[0].Timestamp, BatchID: id}}
		if !reflect.DeepEqual(es, want) {
			t.Fatalf("id %d: %+v", id, es)
		}
	}
	if _, ok := s.seen["/a/b/4"]; !ok {
		t.Fatalf("seen %v", s.seen)
	}
	// New files continue the log: id 5 is 5.compact (interval 3).
	writeDays(t, root, day0, 4, 1, "modern")
	start := off(4)
	for id := int64(5); id < 9; id++ {
		end, err := s.LatestOffset(t.Context(), start)
		if err != nil {
			t.Fatal(err)
		}
		start = end
	}
	// At id 8 with retain 1 the bound is 5: Spark's files 2.compact, 3 and
	// 4 are gone, 5.compact holds all of them.
	if got := strings.Join(logNames(t, fs, env.MetadataDir), " "); got != "5.compact 6 7 8.compact" {
		t.Fatalf("files %s", got)
	}
	l, err := checkpoint.ReadFileSourceLog(fs, env.MetadataDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 9 || l.Entries[0].Path != "/a/b/0" || l.CompactID != 8 {
		t.Fatalf("checkpoint reads %d entries, compact %d", len(l.Entries), l.CompactID)
	}
	s2 := openSource(t, o, env)
	if len(s2.seen) != 9 || s2.nextID != 9 {
		t.Fatalf("restart: %d seen, next %d", len(s2.seen), s2.nextID)
	}
}

func TestDeriveCompactInterval(t *testing.T) {
	// Spark's own examples (CompactibleFileStreamLog, SPARK-18187).
	for _, c := range []struct{ def, latest, want int64 }{
		{10, 2, 3}, {5, 11, 6}, {10, 9, 10}, {10, 29, 10}, {10, 19, 20}, {3, 9, 5}, {10, 100, 101},
	} {
		if got := deriveCompactInterval(c.def, c.latest); got != c.want {
			t.Errorf("deriveCompactInterval(%d, %d) = %d, want %d", c.def, c.latest, got, c.want)
		}
		if got := deriveCompactInterval(c.def, c.latest); (c.latest+1)%got != 0 {
			t.Errorf("interval %d does not make %d a compaction id", got, c.latest)
		}
	}
	// Against Spark's rule written out literally: properDivisors(def, n)
	// is the divisors of n in def..n/2, then n; take the first.
	spark := func(def, latest int64) int64 {
		n := latest + 1
		if n <= def {
			return n
		}
		if def < n/2 {
			for i := def; i <= n/2; i++ {
				if n%i == 0 {
					return i
				}
			}
			return n
		}
		return n
	}
	for def := int64(1); def <= 24; def++ {
		for latest := int64(0); latest < 600; latest++ {
			if got, want := deriveCompactInterval(def, latest), spark(def, latest); got != want {
				t.Fatalf("deriveCompactInterval(%d, %d) = %d, Spark's rule gives %d", def, latest, got, want)
			}
		}
	}
}

// TestPruneOnS3 runs the pruning lifecycle with the checkpoint on each S3
// server: 30 admissions with retain 5 leave ids 19..29, the directory is
// listed only when the bound moves (at ids 14 and 24) plus once by Open,
// each pruned file costs one DELETE, and a restart on S3 alone sees every
// admitted file and re-reads every batch.
func TestPruneOnS3(t *testing.T) {
	s3test.Run(t, func(t *testing.T, srv s3test.Server) {
		srv, counts := srv.Counting(t)
		loc, err := storage.Parse("--checkpoint", srv.Location("q1/checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		fs, err := storage.NewFS(t.Context(), vfs.NewMem(), loc)
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		want := writeDays(t, root, day0, 30, 1, "modern")
		o := Options{URI: fileURI(root), MaxFilesPerTrigger: 1}
		env := stream.SourceEnv{Name: "s3_backfill", MetadataDir: fs.PathJoin(loc.Path, "sources", "s3_backfill"), FS: fs,
			Columns: ethblock.Columns, Clock: stream.SystemClock{}, MinBatchesToRetain: 5}
		s := openSource(t, o, env)
		var start stream.Offset
		for range 30 {
			end, err := s.LatestOffset(t.Context(), start)
			if err != nil {
				t.Fatal(err)
			}
			start = end
		}
		if l, d := counts.Get("LIST"), counts.Get("DELETE"); l != 3 || d != 19 {
			t.Fatalf("30 admissions made %d LISTs and %d DELETEs, want 3 and 19", l, d)
		}
		var wantNames []string
		for id := int64(19); id < 30; id++ {
			wantNames = append(wantNames, s.log.FS.PathBase(s.log.FileName(id)))
		}
		if got := logNames(t, fs, env.MetadataDir); !slices.Equal(got, wantNames) {
			t.Fatalf("files %v, want %v", got, wantNames)
		}
		s2 := openSource(t, o, env)
		if len(s2.seen) != 30 || s2.nextID != 30 {
			t.Fatalf("restart: %d seen, next id %d", len(s2.seen), s2.nextID)
		}
		blocksEqual(t, collect(t, s2, nil, off(29)), want)
	})
}

// FuzzScan feeds the directory scan arbitrary sets of names: it never
// panics, any refusal is CHECKPOINT_CORRUPT, and an accepted directory has
// an interval that keeps its newest compact file a compaction id and a
// gap-free run of ids from it.
func FuzzScan(f *testing.F) {
	f.Add("0,1,2")
	f.Add("2.compact,3,4")
	f.Add("9.compact,10,19.compact,20")
	f.Add("5,6,9.compact,10,x")
	f.Add("19.compact,20,21,.a.tmp")
	f.Add("9223372036854775807.compact")
	f.Add("922372036854777.compact") // found by fuzzing: hung the divisor search
	f.Add("9223372036854775806,9223372036854775807")
	f.Fuzz(func(t *testing.T, list string) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("/s", 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range strings.Split(list, ",") {
			if n == "" || strings.ContainsAny(n, "/\x00") || n == "." || n == ".." {
				continue
			}
			fl, err := fs.Create(fs.PathJoin("/s", n), vfs.WriteCategoryUnspecified)
			if err != nil {
				continue
			}
			fl.Close()
		}
		l := newFileLog(fs, "/s", 5)
		first, next, err := l.Scan()
		if err != nil {
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("scan error without CHECKPOINT_CORRUPT: %v", err)
			}
			return
		}
		if l.Interval() <= 0 || first > next || (l.LatestCompact() >= 0 && (first != l.LatestCompact() || !isCompactID(first, l.Interval()))) {
			t.Fatalf("scan of %q: first %d next %d interval %d compact %d", list, first, next, l.Interval(), l.LatestCompact())
		}
		for id := first; id < next; id++ {
			if _, err := fs.Stat(l.FileName(id)); err != nil {
				t.Fatalf("scan of %q: id %d accepted but %s missing", list, id, l.FileName(id))
			}
		}
	})
}
