package files

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestFaultLoopFileLog fails the i-th file operation on the checkpoint for
// every i, through a run that admits 13 files one per trigger (past a
// compaction at id 9), then crashes the checkpoint (unsynced writes lost)
// and restarts from the last committed offset without faults, as the
// engine would: every row is delivered by exactly one committed batch,
// and a restart never re-admits a file.
func TestFaultLoopFileLog(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	var want []string
	for i := range 13 {
		name := fmt.Sprintf("f%02d.json", i)
		writeFile(t, dir, name, fmt.Sprintf("{\"x\":%d}\n{\"x\":%d}\n", 2*i, 2*i+1))
		touch(t, dir, name, t0.Add(time.Duration(i)*time.Minute))
		want = append(want, fmt.Sprint(2*i), fmt.Sprint(2*i+1))
	}
	slices.Sort(want)
	uri := fileLoc(dir) + "?schema=" + url.QueryEscape("x BIGINT") + "&maxFilesPerTrigger=1"
	const mdir = "/ckpt/sources/s"
	base := vfs.NewCrashableMem()
	if err := streamtest.MkdirAllDurable(base, mdir); err != nil {
		t.Fatal(err)
	}
	// run is the engine's loop: plan, read, commit; it stops at the first
	// error, returning what it committed.
	run := func(fs vfs.FS, committed stream.Offset) (stream.Offset, []string, error) {
		s := mustSource(t, JSON, uri)
		env := stream.SourceEnv{FS: fs, MetadataDir: mdir, Committed: committed, MinBatchesToRetain: 3}
		if err := s.Open(t.Context(), env); err != nil {
			return committed, nil, err
		}
		var delivered []string
		start := committed
		for {
			end, err := s.LatestOffset(t.Context(), start)
			if err != nil {
				return committed, delivered, err
			}
			if string(end) == string(start) {
				return committed, delivered, nil
			}
			var rows []string
			if err := s.ReadBatch(t.Context(), start, end, func(b *stream.Batch) error {
				for i := 0; i < b.Len; i++ {
					rows = append(rows, rowString(b, i))
				}
				return nil
			}); err != nil {
				return committed, delivered, err
			}
			committed, start = end, end
			delivered = append(delivered, rows...)
		}
	}
	fired := 0
	for i := 0; ; i++ {
		faults := streamtest.NewFaultFSOver("/", base.CrashClone(vfs.CrashCloneCfg{}))
		if _, err := faults.Arm(fmt.Sprintf("(ErrInjected (OnIndex %d))", i)); err != nil {
			t.Fatal(err)
		}
		committed, got, err := run(faults.FS(), nil)
		if faults.Injected() == 0 {
			if err != nil {
				t.Fatal(err)
			}
			if fired < 13 {
				t.Fatalf("only %d faults fired: the loop did not reach the log's writes", fired)
			}
			break
		}
		fired++
		faults.Crash()
		_, _ = faults.Arm("off")
		_, more, err := run(faults.FS(), committed)
		if err != nil {
			t.Fatalf("op %d: restart: %v", i, err)
		}
		got = append(got, more...)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("op %d (committed %s): delivered %v, want %v", i, committed, got, want)
		}
	}
}
