package filter

import (
	"context"
	"slices"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// chunkSource emits its chunks from ReadBatch; it reports nothing.
type chunkSource struct {
	stream.Source
	chunks []*stream.Batch
}

func (s *chunkSource) ReadBatch(_ context.Context, _, _ stream.Offset, emit func(*stream.Batch) error) error {
	for _, b := range s.chunks {
		if err := emit(b); err != nil {
			return err
		}
	}
	return nil
}

// TestPushedSourceHidesRejectedEventTimes: the rows the pushed conjuncts
// reject keep every value but the event time, which is null, so that the
// engine's max event time (the watermark) comes from the kept rows only,
// as Spark's EventTimeWatermark above the pushed Filter; the wrapped
// source's batch is not modified.
func TestPushedSourceHidesRejectedEventTimes(t *testing.T) {
	pred, err := Compile(And{L: cmp(Lt, col("n"), num(3)), R: cmp(Eq, col("source"), str("live"))}, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	in := testBatch()
	src := &chunkSource{chunks: []*stream.Batch{in, {}}}
	ps := NewPushedSource(src, "live", pred, "ts")
	if _, ok := ps.(stream.ReportingSource); ok {
		t.Fatal("reports for a source that does not")
	}
	var got []*stream.Batch
	err = ps.ReadBatch(context.Background(), nil, nil, func(b *stream.Batch) error {
		c := *b
		c.Columns = slices.Clone(b.Columns)
		got = append(got, &c)
		return nil
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("read %d chunks: %v", len(got), err)
	}
	ts := got[0].Column("ts")
	if got[0].Len != 4 || !slices.Equal(ts.Valid, []bool{true, true, false, false}) || !slices.Equal(ts.Int64s, in.Columns[2].Int64s) {
		t.Errorf("event time %+v", ts)
	}
	if in.Columns[2].Valid != nil || got[0].Column("gas").Valid[2] {
		t.Errorf("source batch changed or other column masked")
	}
	// Named another source, every row fails source = 'live'.
	ps = NewPushedSource(src, "archive", pred, "ts")
	_ = ps.ReadBatch(context.Background(), nil, nil, func(b *stream.Batch) error {
		if c := b.Column("ts"); b.Len > 0 && slices.Contains(c.Valid, true) {
			t.Errorf("archive rows kept event times %v", c.Valid)
		}
		return nil
	})
}
