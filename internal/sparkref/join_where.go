package sparkref

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// A WHERE over a join's rows (JoinCase.Where): conjuncts on the left
// relation's columns, the right one's, or both. The oracle evaluates the
// WHERE over the rows the join emits (null-padded ones included, a missing
// side's columns null), and models the one way Spark's pushing it below
// the join shows in the answer: a conjunct pushed into a side that does
// not read the side's event time runs below its watermark too, so only
// the rows it keeps advance that side's watermark, which decides what is
// late and when state leaves. Which conjuncts move is written here from
// Spark's rules (EliminateOuterJoin, PushPredicateThroughJoin,
// PushPredicateThroughNonJoin), not from ethstream's code:
//
//   - An outer join narrows when a conjunct rejects the rows where a side
//     is all null: one reading only that side that is not TRUE there, or
//     one inferring IS NOT NULL of a column of it (a comparison or
//     arithmetic over it); LEFT (RIGHT) OUTER becomes INNER when its right
//     (left) side is rejected, FULL OUTER becomes LEFT OUTER, RIGHT OUTER
//     or INNER by the sides rejected.
//   - Then each one-side conjunct moves into its side if the join keeps
//     that side's rows as they are: both sides of INNER, the left of LEFT
//     OUTER and LEFT SEMI, the right of RIGHT OUTER, none of FULL OUTER.

// JoinConj is one conjunct of a join case's WHERE.
type JoinConj struct {
	// SQL is its text, over the relations a and b.
	SQL string
	// Side is the relation it reads (0 a, 1 b), -1 for both.
	Side int
	// TS: it reads its side's event time (it stays above the watermark).
	TS bool
	// NotNull are the sides a column of which Spark infers IS NOT NULL
	// from it (a null-intolerant expression over the column).
	NotNull [2]bool
	eval    func(l, r *JoinRow) tri
}

// idOf, keyOf and tsOf read a column of a row that may be missing (nil,
// its columns null): the value and whether it is null.
func idOf(x *JoinRow) (int64, bool) {
	if x == nil {
		return 0, true
	}
	return x.ID, false
}

func keyOf(x *JoinRow) (string, bool) {
	if x == nil || x.Null {
		return "", true
	}
	return x.K, false
}

func tsOf(x *JoinRow) (int64, bool) {
	if x == nil {
		return 0, true
	}
	return x.TS, false
}

// cmp3 is a comparison's value: unknown on a null operand.
func cmp3(null, v bool) tri {
	switch {
	case null:
		return tNull
	case v:
		return tTrue
	}
	return tFalse
}

// GenJoinWhere draws 1 to 3 conjuncts for c: a left semi join's read the
// left relation only; IS NULL of a side's id is drawn only on a side the
// join fills with nulls (elsewhere it keeps no row). The last round's
// sentinels pass every conjunct, so the watermarks still pass every row.
func GenJoinWhere(rng *rand.Rand, c JoinCase) []JoinConj {
	var out []JoinConj
	rel := []string{"a", "b"}
	for range 1 + rng.IntN(3) {
		side := rng.IntN(2)
		if c.semi() {
			side = 0
		}
		mixed := !c.semi() && rng.IntN(5) == 0
		x := rel[side]
		var j JoinConj
		switch n := int64(rng.IntN(3)); {
		case mixed && rng.IntN(2) == 0:
			j = JoinConj{SQL: fmt.Sprintf("a.id < b.id + %d", 10*n), Side: -1, NotNull: [2]bool{true, true},
				eval: func(l, r *JoinRow) tri {
					a, an := idOf(l)
					b, bn := idOf(r)
					return cmp3(an || bn, a < b+10*n)
				}}
		case mixed:
			kl, kr := fmt.Sprintf("k%d", n), fmt.Sprintf("k%d", 3-n)
			j = JoinConj{SQL: fmt.Sprintf("(a.k = '%s' OR b.k = '%s')", kl, kr), Side: -1,
				eval: func(l, r *JoinRow) tri {
					a, an := keyOf(l)
					b, bn := keyOf(r)
					return or(cmp3(an, a == kl), cmp3(bn, b == kr))
				}}
		default:
			j = oneSideConj(rng, c, side, x, n)
		}
		out = append(out, j)
	}
	// IS NULL of a side with a conjunct that rejects its nulls keeps no
	// row: leave it out.
	var kept []JoinConj
	for i, j := range out {
		isNull := strings.HasSuffix(j.SQL, ".id IS NULL")
		if isNull && slices.ContainsFunc(out, func(o JoinConj) bool { return o.SQL != j.SQL && (o.Side == j.Side || o.NotNull[j.Side]) }) {
			continue
		}
		kept = append(kept, out[i])
	}
	return kept
}

// rowOf is side's row of an output row (l, r).
func rowOf(l, r *JoinRow, side int) *JoinRow {
	if side == 0 {
		return l
	}
	return r
}

// oneSideConj draws a conjunct over relation side (named x).
func oneSideConj(rng *rand.Rand, c JoinCase, side int, x string, n int64) JoinConj {
	j := JoinConj{Side: side}
	nullSupplied := c.Type == "FULL OUTER JOIN" || side == 1 && c.Type == "LEFT OUTER JOIN" || side == 0 && c.Type == "RIGHT OUTER JOIN"
	kinds := 5
	if nullSupplied {
		kinds = 6
	}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	switch rng.IntN(kinds) {
	case 0:
		j.SQL = fmt.Sprintf("%s.id %% 3 <> %d", x, n)
		j.NotNull[side] = true
		j.eval = func(l, r *JoinRow) tri {
			v, null := idOf(rowOf(l, r, side))
			return cmp3(null, v%3 != n)
		}
	case 1:
		lim := int64(8 + rng.IntN(30))
		j.SQL = fmt.Sprintf("%s.id < %d", x, lim)
		j.NotNull[side] = true
		j.eval = func(l, r *JoinRow) tri {
			v, null := idOf(rowOf(l, r, side))
			return cmp3(null, v < lim)
		}
	case 2:
		k := fmt.Sprintf("k%d", n)
		if rng.IntN(2) == 0 {
			j.SQL = fmt.Sprintf("%s.k <> '%s'", x, k)
			j.NotNull[side] = true
			j.eval = func(l, r *JoinRow) tri {
				v, null := keyOf(rowOf(l, r, side))
				return cmp3(null, v != k)
			}
		} else {
			// Not null-intolerant: a missing side passes it.
			j.SQL = fmt.Sprintf("(%s.k IS NULL OR %s.k <> '%s')", x, x, k)
			j.eval = func(l, r *JoinRow) tri {
				v, null := keyOf(rowOf(l, r, side))
				return or(cmp3(false, null), cmp3(null, v != k))
			}
		}
	case 3:
		j.SQL = fmt.Sprintf("%s.k IS NOT NULL", x)
		j.eval = func(l, r *JoinRow) tri {
			_, null := keyOf(rowOf(l, r, side))
			return cmp3(false, !null)
		}
	case 4:
		at := start.Add(time.Duration(rng.IntN(6)-2) * time.Minute)
		j.SQL = fmt.Sprintf("%s.ts >= '%s'", x, at.Format("2006-01-02 15:04:05"))
		j.TS, j.NotNull[side] = true, true
		j.eval = func(l, r *JoinRow) tri {
			v, null := tsOf(rowOf(l, r, side))
			return cmp3(null, v >= at.UnixMicro())
		}
	default:
		j.SQL = fmt.Sprintf("%s.id IS NULL", x)
		j.eval = func(l, r *JoinRow) tri {
			_, null := idOf(rowOf(l, r, side))
			return cmp3(false, null)
		}
	}
	return j
}

// whereSQL is the case's WHERE clause, "" without one.
func (c JoinCase) whereSQL() string {
	if len(c.Where) == 0 {
		return ""
	}
	parts := make([]string, len(c.Where))
	for i, w := range c.Where {
		parts[i] = w.SQL
	}
	return " WHERE " + strings.Join(parts, " AND ")
}

// keeps reports whether the WHERE is TRUE for the output row (l, r).
func (c JoinCase) keeps(l, r *JoinRow) bool {
	for _, w := range c.Where {
		if w.eval(l, r) != tTrue {
			return false
		}
	}
	return true
}

// Pushed is the join type Spark runs the case's join as and, per side,
// the conjuncts it moves into that side (indexes into Where), by the
// rules of this file's comment.
func (c JoinCase) Pushed() (string, [2][]int) {
	typ := c.Type
	var rejected [2]bool
	for _, w := range c.Where {
		for side := range 2 {
			if w.NotNull[side] {
				rejected[side] = true
			}
			if w.Side == side {
				var row [2]*JoinRow
				row[1-side] = &JoinRow{} // not read
				if w.eval(row[0], row[1]) != tTrue {
					rejected[side] = true
				}
			}
		}
	}
	switch {
	case typ == "LEFT OUTER JOIN" && rejected[1], typ == "RIGHT OUTER JOIN" && rejected[0], typ == "FULL OUTER JOIN" && rejected[0] && rejected[1]:
		typ = "JOIN"
	case typ == "FULL OUTER JOIN" && rejected[0]:
		typ = "LEFT OUTER JOIN"
	case typ == "FULL OUTER JOIN" && rejected[1]:
		typ = "RIGHT OUTER JOIN"
	}
	into := map[string][2]bool{"JOIN": {true, true}, "LEFT OUTER JOIN": {true, false}, "LEFT SEMI JOIN": {true, false},
		"RIGHT OUTER JOIN": {false, true}}[typ]
	var pushed [2][]int
	for i, w := range c.Where {
		if w.Side >= 0 && into[w.Side] {
			pushed[w.Side] = append(pushed[w.Side], i)
		}
	}
	return typ, pushed
}

// advances reports whether row x of side advances the side's watermark:
// every conjunct pushed into the side that does not read its event time
// keeps it (pushed from Pushed).
func (c JoinCase) advances(pushed [2][]int, side int, x JoinRow) bool {
	for _, i := range pushed[side] {
		w := c.Where[i]
		if w.TS {
			continue
		}
		var row [2]*JoinRow
		row[side] = &x
		if w.eval(row[0], row[1]) != tTrue {
			return false
		}
	}
	return true
}
