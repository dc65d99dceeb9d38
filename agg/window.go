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

// floorMod is a modulo b in [0, b) for b > 0 (Go's % keeps a's sign).
func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
