package streamtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/ethstream/ethstream/stream"
)

// Source is an in-memory stream.Source over the rows a test appends, in the
// manner of Spark's MemoryStream. Its offset is {"n":<rows consumed>}; a
// batch ends MaxRows rows after its start (all available rows when MaxRows
// is 0), and ReadBatch emits the rows in chunks of ChunkRows, projected on
// the query's columns. Rows with Sign -1 are retractions (see Retracting). The rows survive Close and re-Open, like an archive or
// a chain across process restarts. Set the fields before the first Open;
// the methods are safe for concurrent use.
type Source struct {
	// Name is the source's name in its Description.
	Name string
	// MaxRows is the read limit per batch (maxFilesPerTrigger's twin); 0
	// means none.
	MaxRows int
	// ChunkRows is the number of rows per emitted chunk; 0 means 7, which
	// crosses chunk boundaries in small scripts.
	ChunkRows int
	// Retracting declares that the source may emit retractions (Sign -1),
	// as stream.RetractingSource asks; Append refuses them otherwise.
	Retracting bool
	// Points, when set, is hit at read-start, read-mid (after the first
	// chunk) and source-commit.
	Points *Points
	// Fields, when set, is the declared schema (stream.Source.Schema);
	// nil declares the columns of the rows appended so far.
	Fields []stream.Field

	mu      sync.Mutex
	rows    stream.Batch
	capAt   int // availableNow cap in rows, -1 for none
	env     stream.SourceEnv
	opens   int
	commits []string
}

// NewSource returns an empty source called name.
func NewSource(name string) *Source { return &Source{Name: name, capAt: -1} }

// Append adds the rows of b (copied), which must have the columns of the
// rows appended before, in the same order. It never contains ColSource: the
// engine adds that column.
func (s *Source) Append(b *stream.Batch) error {
	if err := b.Validate(); err != nil {
		return err
	}
	if b.Column(stream.ColSource) != nil {
		return fmt.Errorf("source %s: rows carry the %q column, which the engine adds", s.Name, stream.ColSource)
	}
	for i := 0; i < b.Len; i++ {
		if b.Sign(i) < 0 && !s.Retracting {
			return fmt.Errorf("source %s: row %d is a retraction and the source is not Retracting", s.Name, i)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return appendRows(&s.rows, b, 0, b.Len)
}

// Len returns the number of rows appended.
func (s *Source) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows.Len
}

// Offset returns the offset after n rows.
func Offset(n int) stream.Offset { return stream.Offset(fmt.Sprintf(`{"n":%d}`, n)) }

// ParseOffset returns the number of rows before an offset (0 for nil).
func ParseOffset(o stream.Offset) (int, error) {
	if o == nil {
		return 0, nil
	}
	var v struct {
		N *int `json:"n"`
	}
	if err := json.Unmarshal(o, &v); err != nil || v.N == nil || *v.N < 0 {
		return 0, fmt.Errorf("memory source offset %s: want {\"n\":<rows>}", o)
	}
	return *v.N, nil
}

// Open records the environment; the projection applies to later reads.
func (s *Source) Open(_ context.Context, env stream.SourceEnv) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.env, s.capAt = env, -1
	s.opens++
	return nil
}

// Schema is Fields, or else the columns of the rows appended so far, a
// column nullable when a row holds a null in it.
func (s *Source) Schema() stream.Schema {
	if s.Fields != nil {
		return stream.Schema{Fields: slices.Clone(s.Fields)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var sc stream.Schema
	for _, c := range s.rows.Columns {
		sc.Fields = append(sc.Fields, stream.Field{Name: c.Name, Type: c.Type, Nullable: slices.Contains(c.Valid, false)})
	}
	return sc
}

// Description names the source as Spark names its memory stream.
func (s *Source) Description() string { return "MemoryStream[" + s.Name + "]" }

// PrepareAvailableNow caps the source at the rows appended so far.
func (s *Source) PrepareAvailableNow(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capAt = s.rows.Len
	return nil
}

// LatestOffset returns the end of the next batch from start.
func (s *Source) LatestOffset(_ context.Context, start stream.Offset) (stream.Offset, error) {
	from, err := ParseOffset(start)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end := s.rows.Len
	if s.capAt >= 0 {
		end = min(end, s.capAt)
	}
	if s.MaxRows > 0 {
		end = min(end, from+s.MaxRows)
	}
	if end <= from {
		return start, nil
	}
	return Offset(end), nil
}

// ReadBatch emits the rows in (start, end].
func (s *Source) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	from, err := ParseOffset(start)
	if err != nil {
		return err
	}
	to, err := ParseOffset(end)
	if err != nil {
		return err
	}
	chunk := s.ChunkRows
	if chunk <= 0 {
		chunk = 7
	}
	s.mu.Lock()
	if to > s.rows.Len || from > to {
		s.mu.Unlock()
		return fmt.Errorf("source %s: batch (%d, %d] outside the %d rows appended", s.Name, from, to, s.rows.Len)
	}
	var chunks []*stream.Batch
	for lo := from; lo < to; lo += chunk {
		b, err := project(&s.rows, s.env.Columns, lo, min(lo+chunk, to))
		if err != nil {
			s.mu.Unlock()
			return fmt.Errorf("source %s: %w", s.Name, err)
		}
		chunks = append(chunks, b)
	}
	s.mu.Unlock()
	if err := s.Points.Hit("read-start"); err != nil {
		return err
	}
	for i, b := range chunks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := emit(b); err != nil {
			return err
		}
		if i == 0 {
			if err := s.Points.Hit("read-mid"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Commit records end.
func (s *Source) Commit(_ context.Context, end stream.Offset) error {
	if err := s.Points.Hit("source-commit"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits = append(s.commits, string(end))
	return nil
}

// Commits returns the offsets Commit received, oldest first.
func (s *Source) Commits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commits...)
}

// Env returns the environment of the last Open and how many Opens there were.
func (s *Source) Env() (stream.SourceEnv, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.env, s.opens
}

// Retracts reports Retracting.
func (s *Source) Retracts() bool { return s.Retracting }

// Close does nothing: the rows outlive a run.
func (s *Source) Close() error { return nil }

var (
	_ stream.AvailableNowSource = (*Source)(nil)
	_ stream.RetractingSource   = (*Source)(nil)
)
