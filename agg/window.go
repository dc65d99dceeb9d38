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
