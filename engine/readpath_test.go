package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// randomBatch has one column of each type, some nulls, and signs when
// signed.
func randomBatch(r *rand.Rand, n int, signed bool) *stream.Batch {
	b := &stream.Batch{Len: n, Columns: []stream.Column{
		{Name: "i", Type: stream.Int64}, {Name: "f", Type: stream.Float64},
		{Name: "s", Type: stream.String}, {Name: "t", Type: stream.Timestamp, Valid: make([]bool, n)}}}
	for i := range n {
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, r.Int64N(100))
		b.Columns[1].Float64s = append(b.Columns[1].Float64s, float64(r.IntN(100))/4)
		b.Columns[2].Strings = append(b.Columns[2].Strings, fmt.Sprint("m", r.IntN(9)))
		b.Columns[3].Int64s = append(b.Columns[3].Int64s, r.Int64N(1e12))
		b.Columns[3].Valid[i] = r.IntN(4) != 0
		if signed {
			b.Signs = append(b.Signs, int8(1-2*r.IntN(2)))
		}
	}
	return b
}

// TestKeepRowsAgainstRows: the read path's row kernels agree with a
// row-at-a-time oracle: keepRows keeps exactly the marked rows (values,
// nulls, signs), appendProjected appends chunks projected in the selected
// order.
func TestKeepRowsAgainstRows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var buf stream.Batch
	for iter := range 300 {
		n := r.IntN(20)
		in := randomBatch(r, n, iter%2 == 0)
		keep := make([]bool, n)
		var want []string
		for i := range keep {
			keep[i] = r.IntN(3) != 0 || iter%5 == 0
			if keep[i] {
				want = append(want, fmt.Sprint(streamtest.Row(in, i), " ", in.Sign(i)))
			}
		}
		got := keepRows(&buf, in, keep)
		if err := got.Validate(); err != nil {
			t.Fatal(err)
		}
		var rows []string
		for i := range got.Len {
			rows = append(rows, fmt.Sprint(streamtest.Row(got, i), " ", got.Sign(i)))
		}
		if strings.Join(rows, "\n") != strings.Join(want, "\n") {
			t.Fatalf("iteration %d: kept\n%s\nwant\n%s", iter, strings.Join(rows, "\n"), strings.Join(want, "\n"))
		}
	}
	out := &stream.Batch{}
	var want []string
	for range 20 {
		in := randomBatch(r, r.IntN(9), r.IntN(2) == 0)
		for i := range in.Len {
			want = append(want, fmt.Sprintf("s=%s t=%s i=%s %d", streamtest.Cell(in.Column("s"), i),
				streamtest.Cell(in.Column("t"), i), streamtest.Cell(in.Column("i"), i), in.Sign(i)))
		}
		if err := appendProjected(out, in, []string{"s", "t", "i"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Validate(); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for i := range out.Len {
		if out.Columns[0].Name != "s" || out.Columns[1].Name != "t" || out.Columns[2].Name != "i" {
			t.Fatalf("columns %v", out.Columns)
		}
		rows = append(rows, fmt.Sprintf("s=%s t=%s i=%s %d", streamtest.Cell(&out.Columns[0], i),
			streamtest.Cell(&out.Columns[1], i), streamtest.Cell(&out.Columns[2], i), out.Sign(i)))
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("appended\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// lessThan keeps the rows whose column col is below v (a null is unknown:
// dropped), and counts the rows it was asked about.
type lessThan struct {
	col   string
	v     int64
	asked int
}

func (p *lessThan) Keep(b *stream.Batch) ([]bool, error) {
	c := b.Column(p.col)
	if c == nil {
		return nil, fmt.Errorf("no column %q", p.col)
	}
	keep := make([]bool, b.Len)
	for i := range keep {
		keep[i] = !c.IsNull(i) && c.Int64s[i] < p.v
	}
	p.asked += b.Len
	return keep, nil
}
func (p *lessThan) Columns() []string { return []string{p.col} }
func (p *lessThan) String() string    { return fmt.Sprintf("(%s < %d)", p.col, p.v) }

// numbered is a source of n rows (number, miner) with number 0..n-1.
func numbered(n int) *streamtest.Source {
	src := streamtest.NewSource("s")
	src.Fields = []stream.Field{{Name: "number", Type: stream.Int64}, {Name: "miner", Type: stream.String, Nullable: true}}
	b := &stream.Batch{Len: n, Columns: []stream.Column{{Name: "number", Type: stream.Int64}, {Name: "miner", Type: stream.String}}}
	for i := range n {
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, int64(i))
		b.Columns[1].Strings = append(b.Columns[1].Strings, fmt.Sprint("m", i%3))
	}
	if err := src.Append(b); err != nil {
		panic(err)
	}
	return src
}

// TestStatelessQueryAppends: a query with no stateful operator hands the
// sink, in append mode, the rows its WHERE keeps, projected on Select in
// that order (the source column included), each batch once.
func TestStatelessQueryAppends(t *testing.T) {
	src := numbered(30)
	src.MaxRows = 8
	sink := streamtest.NewSink()
	where := &lessThan{col: "number", v: 20}
	q := Query{Sources: []NamedSource{{Name: "s", Source: src}}, Columns: []string{"number", "miner", stream.ColSource},
		Where: where, Select: []string{stream.ColSource, "number"}, Sink: sink, Trigger: Trigger{Kind: AvailableNow},
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"}}
	fs := vfs.NewMem()
	var events []*stream.Progress
	sum, err := Run(context.Background(), q, Options{CheckpointDir: "/ck", FS: fs, Clock: streamtest.NewClock(time.Unix(1.7e9, 0)),
		Listeners: []Listener{ListenerFunc(func(p *stream.Progress) { events = append(events, p) })}})
	if err != nil || sum.DataBatches != 4 {
		t.Fatalf("run: %+v %v", sum, err)
	}
	var got []string
	for _, a := range sink.Applied() {
		for i := range a.Rows.Len {
			got = append(got, streamtest.Row(a.Rows, i))
		}
	}
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("source=s number=%d", i))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || where.asked != 30 {
		t.Fatalf("sink got\n%s\n(the filter saw %d rows)", strings.Join(got, "\n"), where.asked)
	}
	if _, err := fs.Stat("/ck/state"); err == nil {
		t.Fatal("a query without state has a state directory")
	}
	for _, p := range events {
		if len(p.StateOperators) != 0 || p.StateOperators == nil {
			t.Fatalf("batch %d reports stateOperators %v, want []", p.BatchID, p.StateOperators)
		}
	}
}

// TestReadPathRefusedBeforeWriting: a query reading a column that a
// source's declared schema lacks, selecting a column it does not read, or
// appending a retracting source's rows, is refused before anything is
// written; the error names the source's columns.
func TestReadPathRefusedBeforeWriting(t *testing.T) {
	retracting := numbered(3)
	retracting.Retracting = true
	for _, c := range []struct {
		name string
		q    Query
		code string
		msg  string
	}{
		{"a column the source lacks", Query{Sources: []NamedSource{{Name: "s", Source: numbered(3)}}, Columns: []string{"number", "gas_used"}, Operator: &countOp{}},
			errcode.UnresolvedColumn, `no column "gas_used": its columns are number int64, miner string null`},
		{"a watermark on a column the source lacks", Query{Sources: []NamedSource{{Name: "s", Source: numbered(3)}}, Columns: []string{"number"},
			Watermark: &Watermark{Column: "block_ts"}, Operator: &countOp{}}, errcode.UnresolvedColumn, `no column "block_ts"`},
		{"a watermark on a column not a timestamp", Query{Sources: []NamedSource{{Name: "s", Source: numbered(3)}}, Columns: []string{"number"},
			Watermark: &Watermark{Column: "number"}, Operator: &countOp{}}, errcode.InvalidArgument, "not a timestamp"},
		{"a filter on a column not read", Query{Sources: []NamedSource{{Name: "s", Source: numbered(3)}}, Columns: []string{"miner"},
			Where: &lessThan{col: "number"}, Operator: &countOp{}}, errcode.InvalidArgument, `reads "number"`},
		{"a selected column not read", Query{Sources: []NamedSource{{Name: "s", Source: numbered(3)}}, Columns: []string{"miner"},
			Select: []string{"number"}}, errcode.InvalidArgument, `selects "number"`},
		{"a retracting source appended", Query{Sources: []NamedSource{{Name: "s", Source: retracting}}, Columns: []string{"number"}},
			errcode.InvalidArgument, "may retract rows"},
	} {
		c.q.Sink = streamtest.NewSink()
		c.q.Trigger = Trigger{Kind: AvailableNow}
		c.q.Conf = map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"}
		fs := vfs.NewMem()
		_, err := Run(context.Background(), c.q, Options{CheckpointDir: "/ck", FS: fs, Clock: streamtest.NewClock(time.Unix(1.7e9, 0))})
		if errcode.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %s with %q", c.name, err, c.code, c.msg)
		}
		if _, err := fs.Stat("/ck"); err == nil {
			t.Errorf("%s: the refused start created the checkpoint", c.name)
		}
		if _, err := Plan(context.Background(), c.q, fs, "/ck"); errcode.Code(err) != c.code {
			t.Errorf("%s: plan: %v, want %s", c.name, err, c.code)
		}
	}
}

// doubled is a stateless transform: the column n2 = 2 * number, alone.
type doubled struct{}

func (doubled) Apply(in *stream.Batch) (*stream.Batch, error) {
	c := in.Column("number")
	out := &stream.Batch{Len: in.Len, Columns: []stream.Column{{Name: "n2", Type: stream.Int64}}, Signs: in.Signs}
	for _, v := range c.Int64s {
		out.Columns[0].Int64s = append(out.Columns[0].Int64s, 2*v)
	}
	return out, nil
}
func (doubled) OutputSchema(in stream.Schema) (stream.Schema, error) {
	if in.Field("number") == nil {
		return stream.Schema{}, fmt.Errorf("no column number in %s", in)
	}
	return stream.Schema{Fields: []stream.Field{{Name: "n2", Type: stream.Int64}}}, nil
}
func (doubled) String() string { return "doubled" }

// TestTransformOnlyPlanAppends: a plan of stateless transforms only (no
// stateful operator) appends the rows the WHERE keeps, through its
// transforms, and opens the sink in append mode with their output schema.
func TestTransformOnlyPlanAppends(t *testing.T) {
	src := numbered(10)
	sink := &schemaSink{Sink: streamtest.NewSink()}
	q := Query{Sources: []NamedSource{{Name: "s", Source: src}}, Columns: []string{"number"},
		Where: &lessThan{col: "number", v: 4}, Stages: []Stage{{Transform: doubled{}}}, Sink: sink,
		Trigger: Trigger{Kind: AvailableNow},
		Conf:    map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"}}
	if _, err := Run(context.Background(), q, Options{CheckpointDir: "/ck", FS: vfs.NewMem(), Clock: streamtest.NewClock(time.Unix(1.7e9, 0))}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range sink.Applied() {
		for i := range a.Rows.Len {
			got = append(got, streamtest.Row(a.Rows, i))
		}
	}
	if strings.Join(got, ",") != "n2=0,n2=2,n2=4,n2=6" || !sink.env.Append || sink.env.Schema.String() != "n2 int64" {
		t.Fatalf("sink got %v, opened with %+v", got, sink.env)
	}
}

// schemaSink keeps the environment it was opened with.
type schemaSink struct {
	*streamtest.Sink
	env stream.SinkEnv
}

func (s *schemaSink) Open(ctx context.Context, env stream.SinkEnv) error {
	s.env = env
	return s.Sink.Open(ctx, env)
}

// TestStatelessCrashAtEveryPoint: a query with no stateful operator,
// crashed at every step of every batch (losing all unsynced bytes, or a
// random part of them) and restarted until done, leaves the sink with
// exactly the rows its WHERE keeps, each once: the sink's txn per batch
// makes a re-run batch write nothing twice.
func TestStatelessCrashAtEveryPoint(t *testing.T) {
	// No state: no after-state-commit.
	points := []string{"after-offsets", "before-sink", "sink", "after-commit"}
	rng := rand.New(rand.NewPCG(3, 4))
	var want []string
	for n := 1; n <= 40; n++ {
		want = append(want, fmt.Sprintf("source=a number=%d", n))
	}
	for n := 101; n < 120; n++ {
		want = append(want, fmt.Sprintf("source=b number=%d", n))
	}
	for _, point := range points {
		for nth := 1; nth <= 5; nth++ {
			for _, unsynced := range []int{0, 50} {
				t.Run(fmt.Sprintf("%s@%d/unsynced=%d", point, nth, unsynced), func(t *testing.T) {
					s := newScenario()
					s.table = streamtest.NewSink() // key-less: appends
					s.sources["a"] = &srcWorld{start: 1, available: 40, max: 10}
					s.sources["b"] = &srcWorld{start: 101, available: 130, max: 7}
					mk := func() (Query, Options) {
						q := Query{Columns: []string{"number", stream.ColSource}, Select: []string{stream.ColSource, "number"},
							Where: &lessThan{col: "number", v: 120}, Sink: streamtest.Plain(s.table), Trigger: Trigger{Kind: AvailableNow},
							Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
							Sources: []NamedSource{{"a", &memSource{w: s.sources["a"], name: "a"}},
								{"b", &memSource{w: s.sources["b"], name: "b"}}}}
						return q, Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock}
					}
					q, o := mk()
					hits := 0
					o.crash = func(p string) error {
						if p == point {
							if hits++; hits == nth {
								return errCrash
							}
						}
						return nil
					}
					if point == "sink" {
						s.table.Points = streamtest.MustPoints(fmt.Sprintf("after-sink@%d", nth))
					}
					_, err := Run(context.Background(), q, o)
					if err != errCrash && !strings.Contains(fmt.Sprint(err), errCrash.Error()) {
						t.Fatalf("run: %v", err)
					}
					cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced}
					if unsynced > 0 {
						cfg.RNG = rng
					}
					s.fs = s.fs.CrashClone(cfg)
					s.table.Points = nil
					q, o = mk()
					if _, err := Run(context.Background(), q, o); err != nil {
						t.Fatalf("restart: %v", err)
					}
					var got []string
					for _, a := range s.table.Applied() {
						for i := range a.Rows.Len {
							got = append(got, streamtest.Row(a.Rows, i))
						}
					}
					slices.SortFunc(got, func(x, y string) int { return cmpRow(x, y) })
					if strings.Join(got, "\n") != strings.Join(want, "\n") {
						t.Fatalf("sink holds %d rows, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
					}
				})
			}
		}
	}
}

// cmpRow orders "source=S number=N" rows by source, then number.
func cmpRow(x, y string) int {
	var sx, sy string
	var nx, ny int
	fmt.Sscanf(x, "source=%s number=%d", &sx, &nx)
	fmt.Sscanf(y, "source=%s number=%d", &sy, &ny)
	if c := strings.Compare(sx, sy); c != 0 {
		return c
	}
	return nx - ny
}
