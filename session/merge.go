package session

import (
	"cmp"
	"slices"
)

// span is a session's [start, end) in µs.
type span struct{ start, end int64 }

// piece is one input to a key's merge: a stored session (stored, its
// buffer still in state) or the one-row session of a new row (row, an
// index into the batch's rows).
type piece struct {
	span
	stored bool
	row    int
}

// mergePieces sorts a key's pieces by start (stored before new at equal
// starts, then in arrival order, so float sums add in a fixed order) and
// cuts them into sessions as Spark's MergingSessionsIterator does: a piece
// whose start is at or before the current session's end joins it and may
// extend it; a later one starts the next. It returns each session's span
// and its pieces (subslices of ps, which it reorders).
func mergePieces(ps []piece) (sessions []span, members [][]piece) {
	slices.SortStableFunc(ps, func(a, b piece) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		switch {
		case a.stored && !b.stored:
			return -1
		case !a.stored && b.stored:
			return 1
		}
		return 0
	})
	first := 0
	for i := range ps {
		if i > first && ps[i].start <= sessions[len(sessions)-1].end {
			s := &sessions[len(sessions)-1]
			s.end = max(s.end, ps[i].end)
			continue
		}
		if i > 0 {
			members = append(members, ps[first:i])
		}
		first = i
		sessions = append(sessions, ps[i].span)
	}
	if len(ps) > 0 {
		members = append(members, ps[first:])
	}
	return sessions, members
}
