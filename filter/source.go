package filter

import (
	"context"

	"github.com/ethstream/ethstream/stream"
)

// PushedSource runs the conjuncts of a WHERE that Spark's optimizer pushes
// below the watermark (PushPredicateThroughNonJoin) for the watermark's
// sake: in each chunk its source emits, a row the pushed predicate does not
// keep has its event-time column hidden (null), so that only rows the
// filter keeps advance the engine's max event time (the engine skips null
// event times), as Spark's EventTimeWatermark above the pushed Filter sees
// only those. Nothing else changes: every row still reaches the query
// (numInputRows counts it, as Spark counts the rows a source read), and
// the filter stage before the aggregation (Operator, with the whole WHERE)
// drops exactly the rows it dropped before, because a hidden row fails a
// pushed conjunct, and no pushed conjunct reads the event time.
//
// It implements the optional source interfaces by asking the wrapped
// source (a method the source lacks answers what the engine assumes for
// such a source); stream.ReportingSource only when the wrapped source
// implements it (the engine's default latest offset is the batch's end).
// Like any source, it is driven from one goroutine.
type PushedSource struct {
	stream.Source
	name      string // the source's name, the value of stream.ColSource
	pred      *Predicate
	eventTime string

	out     stream.Batch
	valid   []bool
	srcCol  []string
	scratch stream.Batch
}

// NewPushedSource wraps src (named name) with pushed predicate pred over
// event-time column eventTime: a *PushedSource, or one that also reports
// when src is a stream.ReportingSource.
func NewPushedSource(src stream.Source, name string, pred *Predicate, eventTime string) stream.Source {
	p := &PushedSource{Source: src, name: name, pred: pred, eventTime: eventTime}
	if r, ok := src.(stream.ReportingSource); ok {
		return &reportingPushed{PushedSource: p, r: r}
	}
	return p
}

// reportingPushed is a PushedSource over a stream.ReportingSource.
type reportingPushed struct {
	*PushedSource
	r stream.ReportingSource
}

// ReportLatestOffset is the wrapped source's.
func (s *reportingPushed) ReportLatestOffset() stream.Offset { return s.r.ReportLatestOffset() }

// Metrics are the wrapped source's.
func (s *reportingPushed) Metrics() map[string]string { return s.r.Metrics() }

var (
	_ stream.Source             = (*PushedSource)(nil)
	_ stream.Checker            = (*PushedSource)(nil)
	_ stream.AvailableNowSource = (*PushedSource)(nil)
	_ stream.ReportingSource    = (*reportingPushed)(nil)
	_ stream.RetractingSource   = (*PushedSource)(nil)
)

// ReadBatch reads the wrapped source's range, hiding the event time of the
// rows the pushed predicate rejects.
func (s *PushedSource) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	return s.Source.ReadBatch(ctx, start, end, func(in *stream.Batch) error {
		out, err := s.mask(in)
		if err != nil {
			return err
		}
		return emit(out)
	})
}

// mask returns in, or a copy of its column headers whose event-time column
// has the rejected rows null. The copy reuses buffers until the next call.
func (s *PushedSource) mask(in *stream.Batch) (*stream.Batch, error) {
	ts := in.Column(s.eventTime)
	if in.Len == 0 || ts == nil {
		return in, nil
	}
	keep, err := s.pred.Keep(s.withSource(in))
	if err != nil {
		return nil, err
	}
	all := true
	for _, k := range keep {
		all = all && k
	}
	if all {
		return in, nil
	}
	s.valid = append(s.valid[:0], keep...)
	if ts.Valid != nil {
		for i, v := range ts.Valid {
			s.valid[i] = s.valid[i] && v
		}
	}
	s.out.Len, s.out.Signs = in.Len, in.Signs
	s.out.Columns = append(s.out.Columns[:0], in.Columns...)
	for i := range s.out.Columns {
		if s.out.Columns[i].Name == s.eventTime {
			s.out.Columns[i].Valid = s.valid
		}
	}
	return &s.out, nil
}

// withSource adds the literal source column when the predicate reads it
// and the source does not carry it (the engine adds it after the source).
func (s *PushedSource) withSource(in *stream.Batch) *stream.Batch {
	needs := false
	for _, c := range s.pred.cols {
		needs = needs || c == stream.ColSource
	}
	if !needs || in.Column(stream.ColSource) != nil {
		return in
	}
	for len(s.srcCol) < in.Len {
		s.srcCol = append(s.srcCol, s.name)
	}
	s.scratch.Len, s.scratch.Signs = in.Len, in.Signs
	s.scratch.Columns = append(append(s.scratch.Columns[:0], in.Columns...),
		stream.Column{Name: stream.ColSource, Type: stream.String, Strings: s.srcCol[:in.Len]})
	return &s.scratch
}

// Check asks the wrapped source, if it checks.
func (s *PushedSource) Check(ctx context.Context) error {
	if c, ok := s.Source.(stream.Checker); ok {
		return c.Check(ctx)
	}
	return nil
}

// PrepareAvailableNow asks the wrapped source, if it supports availableNow.
func (s *PushedSource) PrepareAvailableNow(ctx context.Context) error {
	if a, ok := s.Source.(stream.AvailableNowSource); ok {
		return a.PrepareAvailableNow(ctx)
	}
	return nil
}

// Retracts is the wrapped source's answer, false if it never retracts.
func (s *PushedSource) Retracts() bool {
	if r, ok := s.Source.(stream.RetractingSource); ok {
		return r.Retracts()
	}
	return false
}

// Unwrap returns the wrapped source.
func (s *PushedSource) Unwrap() stream.Source { return s.Source }
