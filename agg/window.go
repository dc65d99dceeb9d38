package agg

// floorDiv returns floor(a / b) for b > 0, also for negative a (timestamps
// before 1970 still fall into epoch-aligned windows).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// lastWindowStart returns the start of the latest window containing ts: the
// largest multiple of slide that is <= ts (Spark aligns windows to the epoch).
func lastWindowStart(ts, slide int64) int64 {
	return floorDiv(ts, slide) * slide
}

// windowsOf calls fn for every window [start, start+size) containing ts, from
// the latest start to the earliest, as Spark's sliding window expansion does.
// It is the reference the vectorised loop in Process is tested against.
func windowsOf(ts, size, slide int64, fn func(start, end int64)) {
	last := lastWindowStart(ts, slide)
	for start := last; start > ts-size; start -= slide {
		fn(start, start+size)
	}
}
