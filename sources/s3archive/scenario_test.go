package s3archive

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestScenarios runs the admission lifecycle scripts in testdata/ (regenerate
// with -rewrite). Commands:
//
//	write first=YYYY-MM-DD days=N [per-day=R] [parts=P] [era=E]   write daily files
//	damage day=YYYY-MM-DD | repair day=YYYY-MM-DD                  truncate / restore part 0
//	open [max-files=N] [max-bytes=N] [skip-unreadable] [retain=N]  a new Source (a restart) on the same checkpoint
//	                                                               (retain: the engine's minBatchesToRetain)
//	available-now                                                  PrepareAvailableNow
//	latest start=-|N                                               LatestOffset
//	advance start=-|N times=K                                      LatestOffset K times, each from the last end: the last end
//	read start=-|N end=N                                           ReadBatch: files and rows read
//	log                                                            the source log files, timestamps elided
//	files                                                          the source log's file names, in id order
//
// and the harness's built-ins (internal/streamtest): fault (errorfs DSL on
// the checkpoint), crash, inspect.
func TestScenarios(t *testing.T) {
	streamtest.Walk(t, "testdata", func(w *streamtest.World) streamtest.Commands {
		sc := &admissionScript{root: w.T.TempDir(), saved: map[string][]byte{}}
		sc.fs = w.Faults.FS()
		// The engine makes the metadata directory durable before Open.
		if err := streamtest.MkdirAllDurable(sc.fs, "/ckpt/sources/s3_backfill"); err != nil {
			w.T.Fatal(err)
		}
		sc.env = testEnv(w.T, sc.fs)
		return streamtest.Commands{"write": sc.write, "damage": sc.damage, "repair": sc.damage, "open": sc.open,
			"available-now": sc.availableNow, "latest": sc.latest, "advance": sc.advance, "files": sc.files,
			"read": sc.read, "log": sc.log}
	})
}

// admissionScript is one script's archive (root, on the local disk), its
// checkpoint (on the world's fault FS) and the open source, one handler per
// command.
type admissionScript struct {
	root  string
	fs    vfs.FS
	env   stream.SourceEnv
	s     *Source
	saved map[string][]byte
}

func (sc *admissionScript) off(t *testing.T, td *datadriven.TestData, key string) stream.Offset {
	var v string
	td.ScanArgs(t, key, &v)
	if v == "-" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s: bad %s=%s", td.Pos, key, v)
	}
	return formatOffset(n)
}

func (sc *admissionScript) clean(s string) string {
	s = strings.ReplaceAll(s, fileURI(sc.root), "$ROOT")
	return regexp.MustCompile(`"timestamp":\d+`).ReplaceAllString(s, `"timestamp":T`)
}

func (sc *admissionScript) write(w *streamtest.World, td *datadriven.TestData) string {
	t := w.T
	var first string
	days, perDay, parts, era := 1, 2, 1, "modern"
	td.ScanArgs(t, "first", &first)
	td.MaybeScanArgs(t, "days", &days)
	td.MaybeScanArgs(t, "per-day", &perDay)
	td.MaybeScanArgs(t, "parts", &parts)
	td.MaybeScanArgs(t, "era", &era)
	d0, err := time.Parse(time.DateOnly, first)
	if err != nil {
		t.Fatal(err)
	}
	for d := range days {
		day := d0.AddDate(0, 0, d)
		for p := range parts {
			writeEra(t, dayPath(sc.root, day, p), era, genBlocks(day.Unix()/12+int64(p*perDay), perDay, day.Add(time.Duration(p*perDay)*12*time.Second)))
		}
	}
	return ""
}

// damage truncates part 0 of a day (damage) or restores it (repair).
func (sc *admissionScript) damage(w *streamtest.World, td *datadriven.TestData) string {
	t := w.T
	var day string
	td.ScanArgs(t, "day", &day)
	d, _ := time.Parse(time.DateOnly, day)
	p := dayPath(sc.root, d, 0)
	if td.Cmd == "damage" {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sc.saved[p] = data
		data = data[:len(data)-10]
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	} else if err := os.WriteFile(p, sc.saved[p], 0o644); err != nil {
		t.Fatal(err)
	}
	return ""
}

func (sc *admissionScript) open(w *streamtest.World, td *datadriven.TestData) string {
	t := w.T
	o := Options{URI: fileURI(sc.root)}
	td.MaybeScanArgs(t, "max-files", &o.MaxFilesPerTrigger)
	td.MaybeScanArgs(t, "max-bytes", &o.MaxBytesPerTrigger)
	o.SkipUnreadable = td.HasArg("skip-unreadable")
	sc.env.MinBatchesToRetain = 0
	td.MaybeScanArgs(t, "retain", &sc.env.MinBatchesToRetain)
	var err error
	if sc.s, err = New(withBlocks(o)); err != nil {
		return "error: " + err.Error()
	}
	if err := sc.s.Open(t.Context(), sc.env); err != nil {
		return "error: " + errcode.Code(err)
	}
	return ""
}

func (sc *admissionScript) availableNow(w *streamtest.World, td *datadriven.TestData) string {
	if err := sc.s.PrepareAvailableNow(w.T.Context()); err != nil {
		return "error: " + err.Error()
	}
	return ""
}

func (sc *admissionScript) latest(w *streamtest.World, td *datadriven.TestData) string {
	o, err := sc.s.LatestOffset(w.T.Context(), sc.off(w.T, td, "start"))
	if err != nil {
		if errcode.Code(err) == "" { // an environment failure (an armed fault): its text
			return "error: " + streamtest.ScrubTemp(err.Error())
		}
		return "error: " + errcode.Code(err)
	}
	if o == nil {
		return "nil"
	}
	return string(o)
}

func (sc *admissionScript) advance(w *streamtest.World, td *datadriven.TestData) string {
	var times int
	td.ScanArgs(w.T, "times", &times)
	o := sc.off(w.T, td, "start")
	for range times {
		next, err := sc.s.LatestOffset(w.T.Context(), o)
		if err != nil {
			return "error: " + errcode.Code(err)
		}
		o = next
	}
	if o == nil {
		return "nil"
	}
	return string(o)
}

func (sc *admissionScript) files(w *streamtest.World, td *datadriven.TestData) string {
	return strings.Join(logNames(w.T, sc.fs, sc.env.MetadataDir), " ")
}

func (sc *admissionScript) read(w *streamtest.World, td *datadriven.TestData) string {
	var out strings.Builder
	rows := 0
	var last int64 = -1
	err := sc.s.ReadBatch(w.T.Context(), sc.off(w.T, td, "start"), sc.off(w.T, td, "end"), func(b *stream.Batch) error {
		rows += b.Len
		if c := b.Column(ethblock.ColBlockTS); c != nil && b.Len > 0 {
			d := time.UnixMicro(c.Int64s[0]).UTC().Format(time.DateOnly)
			if c.Int64s[0] < last {
				return fmt.Errorf("rows out of order")
			}
			last = c.Int64s[b.Len-1]
			fmt.Fprintf(&out, "%s rows=%d\n", d, b.Len)
		}
		return nil
	})
	if err != nil {
		return sc.clean(out.String() + "error: " + errcode.Code(err) + " " + pathOf(err) + "\n")
	}
	fmt.Fprintf(&out, "total rows=%d skipped=%s\n", rows, sc.s.Metrics()["skippedFiles"])
	return sc.clean(out.String())
}

func (sc *admissionScript) log(w *streamtest.World, td *datadriven.TestData) string {
	var out strings.Builder
	for _, n := range logNames(w.T, sc.fs, sc.env.MetadataDir) {
		f, err := sc.fs.Open(sc.fs.PathJoin(sc.env.MetadataDir, n))
		if err != nil {
			w.T.Fatal(err)
		}
		data, _ := io.ReadAll(f)
		f.Close()
		fmt.Fprintf(&out, "%s:\n%s\n", n, sc.clean(string(data)))
	}
	return out.String()
}

// logNames lists the source log directory in id order.
func logNames(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(names, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimSuffix(names[i], ".compact"))
		b, _ := strconv.Atoi(strings.TrimSuffix(names[j], ".compact"))
		return a < b
	})
	return names
}

func pathOf(err error) string {
	var e *errcode.Error
	if errorsAs(err, &e) {
		return e.Path
	}
	return ""
}
