package streamtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/stream"
)

func numbers(lo, hi int64) *stream.Batch {
	b := &stream.Batch{Columns: []stream.Column{{Name: "number", Type: stream.Int64}, {Name: "miner", Type: stream.String}}}
	for n := lo; n < hi; n++ {
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, n)
		b.Columns[1].Strings = append(b.Columns[1].Strings, fmt.Sprintf("0x%d", n%3))
		b.Len++
	}
	return b
}

// TestSourceBatches checks the source against its contract: batches end at
// the read limit, a re-read of the same offsets yields the same rows, the
// projection is honoured, availableNow caps, retractions need Retracting.
func TestSourceBatches(t *testing.T) {
	ctx := context.Background()
	s := NewSource("s")
	s.MaxRows = 8
	if err := s.Append(numbers(0, 20)); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SourceEnv{Columns: []string{"number"}}); err != nil {
		t.Fatal(err)
	}
	var ends []string
	var start stream.Offset
	for {
		end, err := s.LatestOffset(ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		if string(end) == string(start) {
			break
		}
		var got, again []string
		for _, into := range []*[]string{&got, &again} {
			if err := s.ReadBatch(ctx, start, end, func(b *stream.Batch) error {
				if len(b.Columns) != 1 || b.Columns[0].Name != "number" {
					return fmt.Errorf("projection: %d columns", len(b.Columns))
				}
				*into = append(*into, fmt.Sprintf("%v", b.Columns[0].Int64s))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if strings.Join(got, " ") != strings.Join(again, " ") {
			t.Fatalf("re-read of (%s, %s]: %v then %v", start, end, got, again)
		}
		ends = append(ends, string(end)+strings.Join(got, ""))
		start = end
	}
	want := `{"n":8}[0 1 2 3 4 5 6][7] {"n":16}[8 9 10 11 12 13 14][15] {"n":20}[16 17 18 19]`
	if got := strings.Join(ends, " "); got != want {
		t.Fatalf("batches %s, want %s", got, want)
	}
	if err := s.PrepareAvailableNow(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(numbers(20, 25)); err != nil {
		t.Fatal(err)
	}
	if end, _ := s.LatestOffset(ctx, start); string(end) != string(start) {
		t.Fatalf("availableNow: latest %s past the cap %s", end, start)
	}
	r := numbers(3, 4)
	r.Signs = []int8{-1}
	if err := s.Append(r); err == nil || s.Retracts() {
		t.Fatalf("retraction into a non-retracting source: %v", err)
	}
	if _, err := ParseOffset(stream.Offset(`{"block":3}`)); err == nil {
		t.Fatal("a foreign offset parsed")
	}
}

// TestSinkMerge checks the sink's two rules: MERGE by the schema key
// (insert replaces, retraction deletes) and one application per batch id
// and query id.
func TestSinkMerge(t *testing.T) {
	ctx := context.Background()
	s := NewSink()
	if rec, _ := s.RecordedBatches(ctx); rec != nil {
		t.Fatalf("new sink records %v", rec)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q1", Schema: stream.Schema{Key: []string{"miner"}}}); err != nil {
		t.Fatal(err)
	}
	add := func(id int64, b *stream.Batch) {
		t.Helper()
		if _, err := s.AddBatch(ctx, id, b); err != nil {
			t.Fatal(err)
		}
	}
	add(0, numbers(0, 4)) // miners 0x0 0x1 0x2 0x0: the last 0x0 wins
	del := numbers(1, 2)
	del.Signs = []int8{-1}
	add(1, del)
	add(1, numbers(10, 13)) // a re-run of batch 1: skipped
	add(0, numbers(20, 23)) // older: skipped
	got := strings.Join(s.Lines(), "; ")
	want := "0x0: miner=0x0 number=3; 0x2: miner=0x2 number=2"
	if got != want {
		t.Fatalf("table %s, want %s", got, want)
	}
	if rec, _ := s.RecordedBatches(ctx); fmt.Sprint(rec) != "map[q1:1]" || len(s.Applied()) != 2 || s.Calls() != 4 {
		t.Fatalf("record %v, %d applied of %d calls", rec, len(s.Applied()), s.Calls())
	}
	// Another query id has its own txn.
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q2"}); err != nil {
		t.Fatal(err)
	}
	add(0, numbers(7, 8))
	if rec, _ := s.RecordedBatches(ctx); fmt.Sprint(rec) != "map[q1:1 q2:0]" {
		t.Fatalf("record %v", rec)
	}
}

// TestSinkKeyFailuresPlain: Key keys a table whose output schema names no
// key; a Failures hit fails AddBatch with ErrSinkFailure and applies
// nothing (the next call applies); Plain hides OutputID and
// RecordedBatches but writes the same table.
func TestSinkKeyFailuresPlain(t *testing.T) {
	ctx := context.Background()
	s := NewSink()
	s.Key = []string{"miner"}
	s.Failures = MustPoints("before-sink@2")
	p := Plain(s)
	if _, ok := p.(stream.RecordingSink); ok {
		t.Fatal("Plain records batches")
	}
	if _, ok := p.(stream.IdentifiedSink); ok {
		t.Fatal("Plain has an identity")
	}
	if err := p.Open(ctx, stream.SinkEnv{QueryID: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddBatch(ctx, 0, numbers(0, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddBatch(ctx, 1, numbers(5, 6)); !errors.Is(err, ErrSinkFailure) {
		t.Fatalf("second AddBatch: %v, want ErrSinkFailure", err)
	}
	if _, err := p.AddBatch(ctx, 1, numbers(5, 6)); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(s.Lines(), "; ")
	want := "0x0: miner=0x0 number=0; 0x1: miner=0x1 number=1; 0x2: miner=0x2 number=5"
	if got != want || len(s.Applied()) != 2 {
		t.Fatalf("table %s (%d applied), want %s", got, len(s.Applied()), want)
	}
}

func TestPoints(t *testing.T) {
	p := MustPoints("a@2, b")
	var got []string
	for _, n := range []string{"a", "b", "a", "a", "b"} {
		if err := p.Hit(n); err != nil {
			if !errors.Is(err, ErrCrash) {
				t.Fatal(err)
			}
			got = append(got, n)
		}
	}
	if fmt.Sprint(got) != "[b a]" || fmt.Sprint(p.Fired()) != "[b a]" || len(p.Pending()) != 0 {
		t.Fatalf("fired %v (%v), pending %v", got, p.Fired(), p.Pending())
	}
	if _, err := ParsePoints("a@0"); err == nil {
		t.Fatal("a@0 parsed")
	}
	var none *Points
	if none.Hit("a") != nil {
		t.Fatal("a nil schedule fired")
	}
}

// TestScripts runs testdata/ with the built-in commands plus write and
// remove, which act on the fault FS as the code under test would.
func TestScripts(t *testing.T) {
	Walk(t, "testdata", func(w *World) Commands {
		fs := w.Faults.FS()
		return Commands{
			"write": func(w *World, d *datadriven.TestData) string {
				var p string
				d.ScanArgs(w.T, "path", &p)
				p = fs.PathJoin(Root, p)
				err := func() error {
					if err := MkdirAllDurable(fs, fs.PathDir(p)); err != nil {
						return err
					}
					f, err := fs.Create(p, vfs.WriteCategoryUnspecified)
					if err != nil {
						return err
					}
					if _, err := f.Write([]byte(d.Input)); err != nil {
						return errors.Join(err, f.Close())
					}
					if d.HasArg("sync") {
						if err := f.Sync(); err != nil {
							return errors.Join(err, f.Close())
						}
					}
					if err := f.Close(); err != nil {
						return err
					}
					if d.HasArg("sync") {
						dir, err := fs.OpenDir(fs.PathDir(p))
						if err != nil {
							return err
						}
						return errors.Join(dir.Sync(), dir.Close())
					}
					return nil
				}()
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return "ok\n"
			},
			"read": func(w *World, d *datadriven.TestData) string {
				var p string
				d.ScanArgs(w.T, "path", &p)
				f, err := fs.Open(fs.PathJoin(Root, p))
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				f.Close()
				return "ok\n"
			},
		}
	})
}

// TestClock checks the manual clock: Now steps, Sleep advances and records,
// StopAfter counts from the call.
func TestClock(t *testing.T) {
	ctx := context.Background()
	c := NewClock(Epoch)
	c.SetStep(time.Millisecond)
	if got := c.Now().Sub(Epoch); got != time.Millisecond {
		t.Fatalf("first Now %v after the epoch", got)
	}
	if err := c.Sleep(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	c.StopAfter(2)
	if err := c.Sleep(ctx, time.Second); err != nil {
		t.Fatalf("first sleep after StopAfter(2): %v", err)
	}
	if err := c.Sleep(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("second sleep after StopAfter(2): %v", err)
	}
	if got := c.Now().Sub(Epoch); got != time.Minute+time.Second+2*time.Millisecond {
		t.Fatalf("clock at %v, want 1m1.002s", got)
	}
	if fmt.Sprint(c.Sleeps()) != "[1m0s 1s 1s]" {
		t.Fatalf("sleeps %v", c.Sleeps())
	}
}
