package stream

// Predicate is a row filter the engine runs in its read path, before the
// first operator (a WHERE; package filter compiles SQL's). Keep must be a
// pure function of each row's values, so that a re-run of a batch keeps
// the same rows, and must be safe for use by one goroutine at a time.
type Predicate interface {
	// Keep returns, for each row of b, whether the predicate holds (TRUE:
	// FALSE and UNKNOWN drop the row). The slice may be reused by the next
	// call.
	Keep(b *Batch) ([]bool, error)
	// Columns are the input columns the predicate reads (ColSource
	// included when it reads it).
	Columns() []string
	// String renders the predicate for plans and errors.
	String() string
}
