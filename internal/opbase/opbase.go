// Package opbase is the plumbing every stateful operator (agg, dedup, join,
// session, limit) shares around its state.Store, written once: opening the
// store from the engine's stream.OperatorEnv, the batch lifecycle the engine
// drives (a batch begins with its first Process or Finish, is finished, then
// committed or aborted), the commit's figures in the stateOperators entry,
// the guard that repartitions only between batches, closing, the refusal of
// retractions and the empty output batch. What differs between the
// operators (state layout, rules, metrics) stays in each of them.
//
// The operator owns its store (a field it reads and writes through); a
// Lifecycle is given that store by each call, so an operator holds one
// reference to it, not two to keep in step.
package opbase

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// Lifecycle is one stateful operator's batch lifecycle over its store. The
// zero value is not usable: make it with New. It is driven from the
// operator's goroutine and is not safe for concurrent use.
type Lifecycle struct {
	// name is the operator's kind in the lifecycle's errors ("join").
	name string
	// desc renders the operator in a failed commit's error (its plan's
	// text); nil: name.
	desc fmt.Stringer
	// active: a batch has begun and is neither committed nor aborted;
	// finished: its Finish ran (only Commit or Abort may follow).
	active, finished bool
	id               int64
}

// New returns the lifecycle of an operator of kind name, rendered by desc
// in the error of a failed commit (nil: by name).
func New(name string, desc fmt.Stringer) Lifecycle {
	return Lifecycle{name: name, desc: desc}
}

func (l *Lifecycle) describe() any {
	if l.desc == nil {
		return l.name
	}
	return l.desc
}

// Open opens the operator's store (s, which must be nil: the operator is
// closed) at env.Version with opts' Schema and SpecCompatible and env's
// directory, file system, local cache directory and its file system, and
// partition count. It returns the store and the logger it logs to: env's,
// slog.Default when env has none. The batch state is reset.
func (l *Lifecycle) Open(ctx context.Context, s *state.Store, env stream.OperatorEnv, opts state.Options) (*state.Store, *slog.Logger, error) {
	if s != nil {
		return nil, nil, fmt.Errorf("%s operator already open", l.name)
	}
	logger := Logger(env)
	opts.Dir, opts.FS, opts.LocalDir, opts.LocalFS, opts.Partitions, opts.Logger = env.StateDir, env.FS, env.LocalDir, env.LocalFS, env.Partitions, logger
	st, err := state.Open(ctx, opts, env.Version)
	if err != nil {
		return nil, nil, err
	}
	l.End()
	return st, logger, nil
}

// Logger is the logger an operator logs to: env.Logger, slog.Default when
// the engine gave none.
func Logger(env stream.OperatorEnv) *slog.Logger {
	if env.Logger == nil {
		return slog.Default()
	}
	return env.Logger
}

// Begin starts batch id on the operator's first Process or Finish of it,
// or continues it. started reports a batch just begun: the operator then
// resets its per-batch figures. A closed operator (s nil), another batch
// while one is uncommitted, and a batch already finished are refused.
func (l *Lifecycle) Begin(s *state.Store, id int64) (started bool, err error) {
	if s == nil {
		return false, fmt.Errorf("%s operator is not open", l.name)
	}
	if l.active {
		if id != l.id {
			return false, fmt.Errorf("%s: batch %d started while batch %d is uncommitted", l.name, id, l.id)
		}
		if l.finished {
			return false, fmt.Errorf("%s: batch %d already finished", l.name, id)
		}
		return false, nil
	}
	l.active, l.finished, l.id = true, false, id
	return true, nil
}

// Finish marks the running batch finished: Commit or Abort comes next.
func (l *Lifecycle) Finish() { l.finished = true }

// Active reports whether a batch has begun and is neither committed nor
// aborted.
func (l *Lifecycle) Active() bool { return l.active }

// ID is the id of the running batch (of the last one between batches).
func (l *Lifecycle) ID() int64 { return l.id }

// End leaves the batch: after its commit, or when it is aborted or the
// operator closed or opened.
func (l *Lifecycle) End() { l.active, l.finished = false, false }

// Committable refuses a commit of anything but the finished batch id of
// an open operator (s not nil).
func (l *Lifecycle) Committable(s *state.Store, id int64) error {
	if s == nil {
		return fmt.Errorf("%s operator is not open", l.name)
	}
	if !l.active || !l.finished || l.id != id {
		return fmt.Errorf("%s: commit of batch %d before its Finish", l.name, id)
	}
	return nil
}

// Prepare writes s's version id's data without making it visible
// (stream.CommitPreparer, state.Store.Prepare), once its batch is
// finished; Commit then publishes it.
func (l *Lifecycle) Prepare(ctx context.Context, s *state.Store, id int64) error {
	if err := l.Committable(s, id); err != nil {
		return err
	}
	if err := s.Prepare(ctx, id); err != nil {
		return fmt.Errorf("%s: prepare state version %d: %w", l.describe(), id, err)
	}
	return nil
}

// Commit makes s's version id durable once its batch is finished, records
// the commit's figures (commitTimeMs, memoryUsedBytes, numRowsTotal) in
// pr, the batch's stateOperators entry, and ends the batch. The store's
// metrics are returned for the figures only the operator knows how to
// report. A failed commit leaves the batch running (to Abort).
func (l *Lifecycle) Commit(ctx context.Context, s *state.Store, id int64, pr *stream.OperatorProgress) (state.Metrics, error) {
	if err := l.Committable(s, id); err != nil {
		return state.Metrics{}, err
	}
	m, err := s.Commit(ctx, id)
	if err != nil {
		return m, fmt.Errorf("%s: commit state version %d: %w", l.describe(), id, err)
	}
	pr.CommitTimeMs = m.CommitTimeMs
	pr.MemoryUsedBytes = m.MemoryUsedBytes
	pr.NumRowsTotal = m.RowsTotal
	l.End()
	return m, nil
}

// Abort discards s's pending changes (s may be nil: closed) and ends the
// batch.
func (l *Lifecycle) Abort(s *state.Store) {
	if s != nil {
		s.Abort()
	}
	l.End()
}

// Repartition writes s's state committed at base into n partitions as
// version id (state.Store.Repartition), between batches only; the store
// continues with n partitions.
func (l *Lifecycle) Repartition(ctx context.Context, s *state.Store, base, id int64, n int) (stream.RepartitionStats, error) {
	if s == nil {
		return stream.RepartitionStats{}, fmt.Errorf("%s operator is not open", l.name)
	}
	if l.active {
		return stream.RepartitionStats{}, fmt.Errorf("%s: repartition while batch %d is uncommitted", l.name, l.id)
	}
	return s.Repartition(ctx, base, id, n)
}

// Close discards s's uncommitted changes and closes it (s nil: already
// closed), and ends the batch. The operator then drops its reference to s
// and may be opened again.
func (l *Lifecycle) Close(s *state.Store) error {
	l.End()
	if s == nil {
		return nil
	}
	s.Abort()
	return s.Close()
}

// CodeRetractionUnsupported is the error code of a retraction an operator
// cannot undo.
const CodeRetractionUnsupported = "RETRACTION_UNSUPPORTED"

// retractionRemedy is the remedy every operator gives for a retraction it
// refuses.
const retractionRemedy = "read the source without retractions (e.g. with confirmations instead of reorg=retract)"

// RefuseRetractions returns RETRACTION_UNSUPPORTED, with the message
// format and args (which say why the operator cannot undo a row), when in
// retracts a row (a Sign of -1); nil otherwise.
func RefuseRetractions(in *stream.Batch, format string, args ...any) error {
	for _, s := range in.Signs {
		if s < 0 {
			return errcode.New(CodeRetractionUnsupported, "", retractionRemedy, format, args...)
		}
	}
	return nil
}

// NewBatch returns an empty batch with s's columns, in order.
func NewBatch(s stream.Schema) *stream.Batch {
	b := &stream.Batch{}
	for _, f := range s.Fields {
		b.Columns = append(b.Columns, stream.Column{Name: f.Name, Type: f.Type})
	}
	return b
}
