package files

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/sinklog"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// orderRow is how the test reads a part file back, through parquet-go's
// generic reader: independent of the sink's column-by-column writer.
type orderRow struct {
	Customer *string  `parquet:"customer,optional"`
	Amount   *float64 `parquet:"amount,optional"`
	Qty      *int64   `parquet:"qty,optional"`
	TS       *int64   `parquet:"ts,optional,timestamp(microsecond:utc)"`
}

func (r orderRow) String() string {
	f := func(p any) string {
		switch v := p.(type) {
		case *string:
			if v != nil {
				return *v
			}
		case *float64:
			if v != nil {
				return fmt.Sprint(*v)
			}
		case *int64:
			if v != nil {
				return fmt.Sprint(*v)
			}
		}
		return "null"
	}
	return f(r.Customer) + "|" + f(r.Amount) + "|" + f(r.Qty) + "|" + f(r.TS)
}

var orderSchema = stream.Schema{Fields: []stream.Field{
	{Name: "customer", Type: stream.String, Nullable: true},
	{Name: "amount", Type: stream.Float64, Nullable: true},
	{Name: "qty", Type: stream.Int64, Nullable: true},
	{Name: "ts", Type: stream.Timestamp, Nullable: true},
}}

// orders is batch b's rows (n of them), with a null in every fifth row;
// the columns are handed over in another order than the schema's.
func orders(b int64, n int) (*stream.Batch, []string) {
	cust := stream.Column{Name: "customer", Type: stream.String, Valid: make([]bool, n)}
	amt := stream.Column{Name: "amount", Type: stream.Float64}
	qty := stream.Column{Name: "qty", Type: stream.Int64, Valid: make([]bool, n)}
	ts := stream.Column{Name: "ts", Type: stream.Timestamp}
	var want []string
	for i := range n {
		k := int64(i) + b*1000
		cust.Strings = append(cust.Strings, fmt.Sprintf("c%d", k%7))
		cust.Valid[i] = i%5 != 1
		amt.Float64s = append(amt.Float64s, float64(k)/4)
		qty.Int64s = append(qty.Int64s, k)
		qty.Valid[i] = i%5 != 3
		ts.Int64s = append(ts.Int64s, 1_700_000_000_000_000+k)
		r := orderRow{Amount: &amt.Float64s[i], TS: &ts.Int64s[i]}
		if cust.Valid[i] {
			r.Customer = &cust.Strings[i]
		}
		if qty.Valid[i] {
			r.Qty = &qty.Int64s[i]
		}
		want = append(want, r.String())
	}
	return &stream.Batch{Len: n, Columns: []stream.Column{ts, qty, cust, amt}}, want
}

// readCommitted reads every row of the files the log lists.
func readCommitted(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	c, err := sinklog.ReadLog(fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range c.Files {
		name := f.Path[strings.LastIndexByte(f.Path, '/')+1:]
		got = append(got, readPart(t, fs, fs.PathJoin(dir, name), f.Size)...)
	}
	return got
}

func readPart(t *testing.T, fs vfs.FS, path string, size int64) []string {
	t.Helper()
	fh, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	if size >= 0 && st.Size() != size {
		t.Fatalf("%s: size %d, log says %d", path, st.Size(), size)
	}
	pf, err := parquet.OpenFile(fh.(io.ReaderAt), st.Size())
	if err != nil {
		t.Fatal(err)
	}
	rd := parquet.NewGenericReader[orderRow](pf)
	rows := make([]orderRow, pf.NumRows())
	if n, err := rd.Read(rows); n != len(rows) || (err != nil && err != io.EOF) {
		t.Fatalf("%s: read %d of %d rows: %v", path, n, len(rows), err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.String())
	}
	return out
}

func newSink(fs vfs.FS, interval int) *Sink {
	return &Sink{FS: fs, Dir: "/out", URI: "file:/out", CompactInterval: interval,
		Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}
}

// TestRoundTrip: the rows of every batch, across compactions and an empty
// batch, read back through the log and parquet-go's generic reader.
func TestRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	s := newSink(fs, 3)
	ctx := context.Background()
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q1", Schema: orderSchema}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for b := range int64(8) {
		n := int(b*37) % 100
		if b == 4 {
			n = 0
		}
		batch, rows := orders(b, n)
		want = append(want, rows...)
		prog, err := s.AddBatch(ctx, b, batch)
		if err != nil {
			t.Fatal(err)
		}
		if prog.NumOutputRows != int64(n) {
			t.Fatalf("batch %d: numOutputRows %d, want %d", b, prog.NumOutputRows, n)
		}
	}
	if got := readCommitted(t, fs, "/out"); !slices.Equal(got, want) {
		t.Fatalf("read %d rows, wrote %d\ngot  %.3q\nwant %.3q", len(got), len(want), got, want)
	}
	names, _ := fs.List("/out/_spark_metadata")
	slices.Sort(names)
	wantNames := []string{"0", "1", "2.compact", "3", "4", "5.compact", "6", "7"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("log files %v, want %v", names, wantNames)
	}
	c, _ := sinklog.ReadLog(fs, "/out")
	if c.LatestBatch != 7 || len(c.Files) != 6 { // batches 1..7 but the empty 4 (batch 0 has no rows)
		t.Fatalf("latest %d, %d files", c.LatestBatch, len(c.Files))
	}
	// The empty batch is committed by "v1" alone.
	b, _ := readAll(fs, "/out/_spark_metadata/4")
	if string(b) != "v1" {
		t.Fatalf("empty batch log %q", b)
	}
}

func readAll(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// TestOutputModes: update and complete are refused with Spark's class.
func TestOutputModes(t *testing.T) {
	if err := CheckOutputMode("append"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"update", "Complete"} {
		err := CheckOutputMode(m)
		if !errcode.Is(err, UnsupportedOutputMode) || !strings.Contains(err.Error(), "does not support "+strings.ToLower(m)) {
			t.Fatalf("%s: %v", m, err)
		}
	}
}

type faultAt struct {
	mu   sync.Mutex
	i, n int
	hit  bool
}

func (f *faultAt) String() string { return fmt.Sprintf("crash at write %d", f.i) }

func (f *faultAt) MaybeError(op errorfs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hit {
		return errorfs.ErrInjected
	}
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	f.n++
	if f.n-1 == f.i {
		f.hit = true
		return errorfs.ErrInjected
	}
	return nil
}

// TestCrashLoop: the run crashes at each write in turn (what was not
// fsynced is lost); a new run re-runs from the batch before the one that
// failed, as the engine re-runs a batch whose commit it did not record.
// Every batch's rows are then committed exactly once, and the directory
// holds no part file the log does not list.
func TestCrashLoop(t *testing.T) {
	const batches = 5
	ctx := context.Background()
	var want []string
	inputs := make([]*stream.Batch, batches)
	for b := range int64(batches) {
		var rows []string
		inputs[b], rows = orders(b, 3+int(b))
		want = append(want, rows...)
	}
	run := func(fs vfs.FS, from int64) (int64, error) {
		s := newSink(fs, 2)
		if err := s.Open(ctx, stream.SinkEnv{QueryID: "q1", Schema: orderSchema}); err != nil {
			return from, err
		}
		for b := from; b < batches; b++ {
			if _, err := s.AddBatch(ctx, b, inputs[b]); err != nil {
				return b, err
			}
		}
		return batches, nil
	}
	crashes := 0
	for i := 0; ; i++ {
		mem := vfs.NewCrashableMem()
		inj := &faultAt{i: i}
		failed, err := run(errorfs.Wrap(mem, inj), 0)
		if err == nil {
			break
		}
		crashes++
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		if _, err := run(crashed, max(failed-1, 0)); err != nil {
			t.Fatalf("crash at write %d: recovery: %v", i, err)
		}
		if got := readCommitted(t, crashed, "/out"); !slices.Equal(got, want) {
			t.Fatalf("crash at write %d (batch %d): read %d rows, want %d\ngot  %.4q\nwant %.4q", i, failed, len(got), len(want), got, want)
		}
		c, _ := sinklog.ReadLog(crashed, "/out")
		names, _ := crashed.List("/out")
		parts := 0
		for _, n := range names {
			if strings.HasPrefix(n, "part-") {
				parts++
			}
		}
		if parts != len(c.Files) {
			t.Fatalf("crash at write %d: %d part files, the log lists %d", i, parts, len(c.Files))
		}
	}
	if crashes < 10 {
		t.Fatalf("only %d crash points", crashes)
	}
	t.Logf("%d crash points", crashes)
}

// TestRerunSkipped: a batch id the log holds is skipped whatever rows it
// brings (Spark's "Skipping already committed batch"); its part file is
// not rewritten.
func TestRerunSkipped(t *testing.T) {
	fs := vfs.NewMem()
	ctx := context.Background()
	s := newSink(fs, 0)
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q1", Schema: orderSchema}); err != nil {
		t.Fatal(err)
	}
	b0, want := orders(0, 10)
	if _, err := s.AddBatch(ctx, 0, b0); err != nil {
		t.Fatal(err)
	}
	other, _ := orders(5, 20)
	prog, err := s.AddBatch(ctx, 0, other)
	if err != nil || prog.NumOutputRows != 0 {
		t.Fatalf("re-run: %+v, %v", prog, err)
	}
	if got := readCommitted(t, fs, "/out"); !slices.Equal(got, want) {
		t.Fatalf("after re-run: %d rows, want %d", len(got), len(want))
	}
}

// TestOpenRefuses: a corrupt log and an unwritable column are refused at
// Open, before anything is written.
func TestOpenRefuses(t *testing.T) {
	fs := vfs.NewMem()
	ctx := context.Background()
	_ = fs.MkdirAll("/out/_spark_metadata", 0o755)
	f, _ := fs.Create("/out/_spark_metadata/0", vfs.WriteCategoryUnspecified)
	_, _ = f.Write([]byte("v7\n"))
	_ = f.Close()
	if err := newSink(fs, 0).Open(ctx, stream.SinkEnv{QueryID: "q", Schema: orderSchema}); !errcode.Is(err, errcode.CheckpointCorrupt) {
		t.Fatalf("corrupt log: %v", err)
	}
	bad := stream.Schema{Fields: []stream.Field{{Name: "a,b", Type: stream.Int64}}}
	if err := newSink(vfs.NewMem(), 0).Open(ctx, stream.SinkEnv{QueryID: "q", Schema: bad}); !errcode.Is(err, errcode.InvalidArgument) {
		t.Fatalf("bad column: %v", err)
	}
}

type windowRow struct {
	Window *struct {
		Start *int64 `parquet:"start,optional,timestamp(microsecond:utc)"`
		End   *int64 `parquet:"end,optional,timestamp(microsecond:utc)"`
	} `parquet:"window,optional"`
	Customer *string `parquet:"customer,optional"`
	Orders   *int64  `parquet:"orders,optional"`
}

// TestWindowStruct: window_start and window_end are written as Spark's
// window struct, in the place of window_start; a null start is a null
// window.
func TestWindowStruct(t *testing.T) {
	fs := vfs.NewMem()
	ctx := context.Background()
	s := newSink(fs, 0)
	schema := stream.Schema{Fields: []stream.Field{
		{Name: "window_start", Type: stream.Timestamp}, {Name: "window_end", Type: stream.Timestamp},
		{Name: "customer", Type: stream.String}, {Name: "orders", Type: stream.Int64}}}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: schema}); err != nil {
		t.Fatal(err)
	}
	b := &stream.Batch{Len: 2, Columns: []stream.Column{
		{Name: "customer", Type: stream.String, Strings: []string{"a", "b"}},
		{Name: "window_end", Type: stream.Timestamp, Int64s: []int64{1800e6, 0}},
		{Name: "window_start", Type: stream.Timestamp, Int64s: []int64{0, 0}, Valid: []bool{true, false}},
		{Name: "orders", Type: stream.Int64, Int64s: []int64{3, 4}},
	}}
	if _, err := s.AddBatch(ctx, 0, b); err != nil {
		t.Fatal(err)
	}
	c, _ := sinklog.ReadLog(fs, "/out")
	fh, err := fs.Open("/out/" + c.Files[0].Path[len("file:/out/"):])
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	pf, err := parquet.OpenFile(fh.(io.ReaderAt), st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range pf.Schema().Fields() {
		names = append(names, f.Name())
	}
	if !slices.Equal(names, []string{"window", "customer", "orders"}) {
		t.Fatalf("columns %v", names)
	}
	rows := make([]windowRow, 2)
	if n, err := parquet.NewGenericReader[windowRow](pf).Read(rows); n != 2 || (err != nil && err != io.EOF) {
		t.Fatalf("read %d: %v", n, err)
	}
	if w := rows[0].Window; w == nil || *w.Start != 0 || *w.End != 1800e6 || *rows[0].Customer != "a" || *rows[0].Orders != 3 {
		t.Fatalf("row 0 %+v", rows[0])
	}
	if rows[1].Window != nil || *rows[1].Customer != "b" || *rows[1].Orders != 4 {
		t.Fatalf("row 1 %+v", rows[1])
	}
}

// TestRemedyNamesTheOutputDirectory: a moved output is refused with a
// remedy in the file sink's terms; other refusals keep the engine's.
func TestRemedyNamesTheOutputDirectory(t *testing.T) {
	s := &Sink{Dir: "/out"}
	if got := s.Remedy(stream.SinkRefusal{Problem: stream.SinkOutputMoved, Location: "/out"}); !strings.Contains(got, "--sink back at /out") {
		t.Fatalf("remedy %q", got)
	}
	if got := s.Remedy(stream.SinkRefusal{Problem: stream.SinkOutputBehind}); got != "" {
		t.Fatalf("remedy for another refusal %q", got)
	}
}
