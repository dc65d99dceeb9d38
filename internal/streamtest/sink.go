package streamtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/ethstream/ethstream/stream"
)

// Sink is an in-memory stream.RecordingSink in the manner of the Delta
// sink: a batch is applied at most once per query id (its txn: a batch id at
// or below the newest applied one is skipped, which makes a re-run after a
// crash idempotent), and each applied batch MERGEs into one table by the
// output schema's key: an insertion replaces the row with its key, a
// retraction (Sign -1) deletes it. Without a key every row is appended. The
// table and the record outlive Close and re-Open, like a table on disk. Its
// methods are safe for concurrent use.
type Sink struct {
	// Points, when set, is hit at before-sink and after-sink.
	Points *Points
	// Failures, when set, is hit at before-sink too, after Points; where
	// it fires, AddBatch fails with ErrSinkFailure and applies nothing (a
	// sink that fails, not a process that dies).
	Failures *Points
	// ID is the identity of the table (OutputID, as a Delta table's
	// metadata id); "" for a sink without one.
	ID string
	// Key is the table's key when the output schema names none (an
	// operator without stream.SchemaOperator); the schema's key wins.
	Key []string

	mu      sync.Mutex
	env     stream.SinkEnv
	txn     map[string]int64 // query id -> newest batch applied
	table   map[string]map[string]string
	keys    []string // appended keys in order, for a key-less table
	applied []Applied
	calls   int
}

// ErrSinkFailure is the error of a before-sink hit that Sink.Failures
// fires.
var ErrSinkFailure = errors.New("injected sink failure")

// Applied is one batch the sink applied: its query id, batch id and rows
// (a copy).
type Applied struct {
	QueryID string
	BatchID int64
	Rows    *stream.Batch
}

// NewSink returns an empty sink.
func NewSink() *Sink {
	return &Sink{txn: map[string]int64{}, table: map[string]map[string]string{}}
}

// Open binds the sink to the query id and output schema of this run.
func (s *Sink) Open(_ context.Context, env stream.SinkEnv) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.env = env
	return nil
}

// Description names the sink in progress events.
func (s *Sink) Description() string { return "MemorySink" }

// AddBatch applies out as batch id of the open query, unless already applied.
func (s *Sink) AddBatch(_ context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	if err := s.Points.Hit("before-sink"); err != nil {
		return stream.SinkProgress{}, err
	}
	if s.Failures.Hit("before-sink") != nil {
		return stream.SinkProgress{}, ErrSinkFailure
	}
	if err := out.Validate(); err != nil {
		return stream.SinkProgress{}, fmt.Errorf("memory sink: batch %d: %w", id, err)
	}
	s.mu.Lock()
	s.calls++
	qid := s.env.QueryID
	last, seen := s.txn[qid]
	if !seen || id > last {
		if err := s.merge(out); err != nil {
			s.mu.Unlock()
			return stream.SinkProgress{}, fmt.Errorf("memory sink: batch %d: %w", id, err)
		}
		rows := &stream.Batch{}
		_ = appendRows(rows, out, 0, out.Len) // out is valid: cannot fail
		s.applied = append(s.applied, Applied{QueryID: qid, BatchID: id, Rows: rows})
		s.txn[qid] = id
	}
	s.mu.Unlock()
	if err := s.Points.Hit("after-sink"); err != nil {
		return stream.SinkProgress{}, err
	}
	return stream.SinkProgress{Description: s.Description(), NumOutputRows: int64(out.Len)}, nil
}

// merge applies out to the table; s.mu is held.
func (s *Sink) merge(out *stream.Batch) error {
	key := s.env.Schema.Key
	if len(key) == 0 {
		key = s.Key
	}
	var keyCols []*stream.Column
	for _, k := range key {
		c := out.Column(k)
		if c == nil {
			return fmt.Errorf("no key column %q", k)
		}
		keyCols = append(keyCols, c)
	}
	for i := 0; i < out.Len; i++ {
		var k string
		if keyCols == nil {
			k = fmt.Sprintf("#%d", len(s.keys))
			s.keys = append(s.keys, k)
		} else {
			parts := make([]string, len(keyCols))
			for j, c := range keyCols {
				parts[j] = Cell(c, i)
			}
			k = strings.Join(parts, "|")
		}
		if out.Sign(i) < 0 {
			delete(s.table, k)
			continue
		}
		row := make(map[string]string, len(out.Columns))
		for c := range out.Columns {
			row[out.Columns[c].Name] = Cell(&out.Columns[c], i)
		}
		s.table[k] = row
	}
	return nil
}

// RecordedBatches returns the newest batch applied per query id; nil when
// nothing was ever applied (the table does not exist yet).
func (s *Sink) RecordedBatches(context.Context) (map[string]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.txn) == 0 {
		return nil, nil
	}
	m := make(map[string]int64, len(s.txn))
	for k, v := range s.txn {
		m[k] = v
	}
	return m, nil
}

// Table returns a copy of the table: key ("|"-joined key cells, "#i" for
// the i-th appended row without a key) -> column name -> Cell.
func (s *Sink) Table() map[string]map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := make(map[string]map[string]string, len(s.table))
	for k, row := range s.table {
		r := make(map[string]string, len(row))
		for c, v := range row {
			r[c] = v
		}
		t[k] = r
	}
	return t
}

// Lines renders the table as sorted lines "key: col=value ..." with the
// columns in name order.
func (s *Sink) Lines() []string {
	var lines []string
	for k, row := range s.Table() {
		cols := make([]string, 0, len(row))
		for c := range row {
			cols = append(cols, c)
		}
		sort.Strings(cols)
		var b strings.Builder
		b.WriteString(k + ":")
		for _, c := range cols {
			b.WriteString(" " + c + "=" + row[c])
		}
		lines = append(lines, b.String())
	}
	sort.Strings(lines)
	return lines
}

// Applied returns the batches applied, in order.
func (s *Sink) Applied() []Applied {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Applied(nil), s.applied...)
}

// Calls returns the number of AddBatch calls that got past before-sink,
// skipped re-runs included.
func (s *Sink) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Close does nothing: the table outlives a run.
func (s *Sink) Close() error { return nil }

// OutputID returns ID.
func (s *Sink) OutputID(context.Context) (string, error) { return s.ID, nil }

var _ stream.IdentifiedSink = (*Sink)(nil)

// Plain returns s as a bare stream.Sink: Open, Description, AddBatch and
// Close only, without OutputID and RecordedBatches, so the engine runs
// none of the table checks those enable (a sink that records nothing, as
// Spark's foreachBatch). The table, the record and the schedules are s's.
func Plain(s *Sink) stream.Sink { return plainSink{s} }

type plainSink struct{ s *Sink }

func (p plainSink) Open(ctx context.Context, env stream.SinkEnv) error { return p.s.Open(ctx, env) }
func (p plainSink) Description() string                                { return p.s.Description() }
func (p plainSink) AddBatch(ctx context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	return p.s.AddBatch(ctx, id, out)
}
func (p plainSink) Close() error { return p.s.Close() }
