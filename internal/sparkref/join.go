package sparkref

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Stream-stream joins (join.go): a generator of join cases over two
// relations of (k STRING, ts TIMESTAMP, id BIGINT) rows, their SQL in
// ethstream's dialect (Databricks' per-relation WATERMARK clauses) and in
// DuckDB's, and a brute-force oracle of the rows a streaming run emits,
// written from the join's definition alone (no code of package join):
//
//   - Each round is one run of the query (a restart): each relation reads
//     its round's rows in one data batch, or two back to back (the
//     round's Left2 and Right2, a second file each), then a no-data batch
//     runs when the watermark moved (Spark's shouldRunAnotherBatch for a
//     join with state watermark predicates).
//   - A row is late, and dropped, when its event time is at or before the
//     previous batch's watermark (Spark 3.4+,
//     getInputWatermarkForLateEvents): the first batch of a run follows a
//     no-data batch at its own watermark, the second batch of a run
//     follows the first.
//   - Within a batch the left rows go first, each joined with the right
//     rows stored before it, then the right rows, each joined with the
//     left rows stored (this batch's included); a pair in range with equal
//     non-null keys is emitted and marks both rows matched. A row is then
//     stored unless its side's state watermark at the batch's watermark W
//     already removes it (Spark's OneSideHashJoiner): the left's is
//     W + Lo - 1 ms (from a.ts >= b.ts + Lo), the right's W - Hi - 1 ms
//     (from a.ts <= b.ts + Hi), each bound non-strict. A null key matches
//     nothing, and a row with one is stored only on a preserved side. A
//     left semi join emits a left row on its first match and stores no
//     matched left row; a right row emits the stored left rows not matched
//     yet.
//   - At the end of each batch the stored rows at or below their side's
//     state watermark leave; a preserved side's unmatched ones are emitted
//     with nulls.
//   - The watermark after a batch is the least of the two sides' (each
//     the max event time its run has read minus its delay, 0 until it
//     reads a row, afresh after a restart), never moving back.
//   - The last round's rows (keys SentinelKey...) match nothing and stay
//     in state.

// JoinTypes are the join types a case draws from, as SQL writes them.
var JoinTypes = []string{"JOIN", "LEFT OUTER JOIN", "RIGHT OUTER JOIN", "FULL OUTER JOIN", "LEFT SEMI JOIN"}

// SentinelKey prefixes the keys of a case's last round.
const SentinelKey = "zz-sentinel"

// JoinRow is one row of a relation: K "" with Null is a null key.
type JoinRow struct {
	K    string
	Null bool
	TS   int64 // µs
	ID   int64
}

// JoinRound is the rows each relation reads in one run, and the state
// partition count the run asks for (a change is an online repartition).
// Left2 and Right2, when either has rows, are a second data batch of the
// run, read right after the first.
type JoinRound struct {
	Left, Right   []JoinRow
	Left2, Right2 []JoinRow
	Partitions    int
}

// JoinCase is a generated join: a.ts BETWEEN b.ts + Lo AND b.ts + Hi on
// equal keys, each relation with its watermark delay, over its rounds.
type JoinCase struct {
	Type                  string
	LeftDelay, RightDelay time.Duration
	Lo, Hi                time.Duration
	Rounds                []JoinRound
	// Where is a WHERE over the join's rows (join_where.go), nil without.
	Where []JoinConj
	// Dedup is each relation's deduplication before the join
	// (join_dedup.go), nil for none.
	Dedup [2]*Dedup
}

// GenJoin draws a case of type typ: 3 to 5 rounds of 4 to 10 rows a side
// around a clock that moves a few minutes a round (a 15-second grid), out of
// order within 3 minutes, one row in eight late by 20 minutes and one in ten with a null
// key (lateFree: delays of an hour, no late row, for a batch engine's
// answer), then the last round far in the future. Half the rounds have a
// second batch a few minutes on, a third of its rows behind by about the
// side's delay, between the first batch's watermark and the second's (not
// late in Spark 3.4+, late by the batch's own watermark).
func GenJoin(rng *rand.Rand, typ string, lateFree bool) JoinCase {
	c := JoinCase{Type: typ, LeftDelay: time.Duration(1+rng.IntN(3)) * time.Minute, RightDelay: time.Duration(1+rng.IntN(3)) * time.Minute,
		Lo: -time.Duration(rng.IntN(4)) * time.Minute, Hi: time.Duration(1+rng.IntN(4)) * time.Minute}
	if lateFree {
		c.LeftDelay, c.RightDelay = time.Hour, time.Hour
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	id := int64(0)
	gen := func() []JoinRow {
		var rows []JoinRow
		for range 4 + rng.IntN(7) {
			r := JoinRow{K: "k" + strconv.Itoa(rng.IntN(4)), ID: id,
				// On a 15-second grid, so that rows meet the range's bounds exactly.
				TS: now + (rng.Int64N(24)-12)*(15*time.Second).Microseconds()}
			id++
			switch {
			case rng.IntN(10) == 0:
				r.K, r.Null = "", true
			case !lateFree && rng.IntN(8) == 0:
				r.TS -= (20 * time.Minute).Microseconds()
			}
			rows = append(rows, r)
		}
		return rows
	}
	// behind moves a third of a second batch's rows back by about delay.
	behind := func(rows []JoinRow, delay time.Duration) []JoinRow {
		for i := range rows {
			if !lateFree && rng.IntN(3) == 0 {
				rows[i].TS -= delay.Microseconds() + (rng.Int64N(9)-2)*(15*time.Second).Microseconds()
			}
		}
		return rows
	}
	for range 3 + rng.IntN(3) {
		rd := JoinRound{Left: gen(), Right: gen(), Partitions: []int{1, 3, 8}[rng.IntN(3)]}
		if rng.IntN(2) == 0 {
			now += int64(1+rng.IntN(3)) * time.Minute.Microseconds()
			rd.Left2, rd.Right2 = behind(gen(), c.LeftDelay), behind(gen(), c.RightDelay)
		}
		c.Rounds = append(c.Rounds, rd)
		now += int64(rng.IntN(5)) * time.Minute.Microseconds()
	}
	far := now + (24 * time.Hour).Microseconds()
	c.Rounds = append(c.Rounds, JoinRound{Left: []JoinRow{{K: SentinelKey + "-l", TS: far, ID: -1}},
		Right: []JoinRow{{K: SentinelKey + "-r", TS: far, ID: -2}}, Partitions: 4})
	return c
}

// semi reports whether the case is a left semi join (its rows are the
// left relation's only).
func (c JoinCase) semi() bool { return c.Type == "LEFT SEMI JOIN" }

func interval(d time.Duration) string {
	if d < 0 {
		return fmt.Sprintf(" - INTERVAL %d SECONDS", int64(-d/time.Second))
	}
	return fmt.Sprintf(" + INTERVAL %d SECONDS", int64(d/time.Second))
}

// SQL is the case in ethstream's SQL over the sources lhs and rhs: the
// output columns lk, lts, lid, rk, rts, rid (a semi join: the l ones).
func (c JoinCase) SQL() string {
	sel := "a.k AS lk, a.ts AS lts, a.id AS lid, b.k AS rk, b.ts AS rts, b.id AS rid"
	if c.semi() {
		sel = "a.k AS lk, a.ts AS lts, a.id AS lid"
	}
	return fmt.Sprintf("SELECT %s FROM lhs WATERMARK ts DELAY OF INTERVAL %d SECONDS AS a %s rhs WATERMARK ts DELAY OF INTERVAL %d SECONDS AS b "+
		"ON a.k = b.k AND a.ts BETWEEN b.ts%s AND b.ts%s%s",
		sel, int64(c.LeftDelay/time.Second), c.Type, int64(c.RightDelay/time.Second), interval(c.Lo), interval(c.Hi), c.whereSQL())
}

// DuckDB is the case as a DuckDB batch query over the Parquet files the
// globs name (the case's rows, the last round's left out), with the
// output of Render: a batch engine's answer, equal to a stream's when no
// row is late.
func (c JoinCase) DuckDB(leftGlob, rightGlob string) string {
	sel := "a.k, epoch_us(a.ts), a.id, b.k, epoch_us(b.ts), b.id"
	typ := strings.Replace(c.Type, " OUTER", "", 1)
	if c.semi() {
		sel, typ = "a.k, epoch_us(a.ts), a.id, NULL, NULL, NULL", "SEMI JOIN"
	}
	lo, hi := c.Lo.Microseconds(), c.Hi.Microseconds()
	src := func(side int, glob string) string {
		if c.Dedup[side] != nil {
			return c.duckDedup(side, glob)
		}
		return fmt.Sprintf("(SELECT * FROM read_parquet('%s') WHERE k IS NULL OR k NOT LIKE '%s%%')", glob, SentinelKey)
	}
	return fmt.Sprintf("SELECT %s FROM %s a %s %s b ON a.k = b.k AND epoch_us(a.ts) BETWEEN epoch_us(b.ts) + %d AND epoch_us(b.ts) + %d",
		sel, src(0, leftGlob), typ, src(1, rightGlob), lo, hi)
}

// Render is one output row as the comparison reads it:
// "lk,lts,lid|rk,rts,rid", null as null.
func Render(l, r *JoinRow) string {
	f := func(x *JoinRow) string {
		if x == nil {
			return "null,null,null"
		}
		k := x.K
		if x.Null {
			k = "null"
		}
		return fmt.Sprintf("%s,%d,%d", k, x.TS, x.ID)
	}
	return f(l) + "|" + f(r)
}

// joinState is one side's stored rows in the oracle, in arrival order.
type joinState struct {
	rows    []JoinRow
	matched []bool
}

// Oracle is the rows the case's streaming run emits, rendered and sorted
// (package comment of join.go).
func (c JoinCase) Oracle() []string {
	var out []string
	var st [2]joinState
	semi := c.semi()
	preserves := func(side int) bool {
		return c.Type == "FULL OUTER JOIN" || side == 0 && c.Type == "LEFT OUTER JOIN" || side == 1 && c.Type == "RIGHT OUTER JOIN"
	}
	inRange := func(l, r JoinRow) bool {
		return !l.Null && !r.Null && l.K == r.K && l.TS >= r.TS+c.Lo.Microseconds() && l.TS <= r.TS+c.Hi.Microseconds()
	}
	// limUs is side's state watermark at watermark wmMs, in µs: a row at
	// or below it can match no row after wmMs.
	limUs := func(side int, wmMs int64) int64 {
		if side == 0 {
			return (wmMs + c.Lo.Milliseconds() - 1) * 1000
		}
		return (wmMs - c.Hi.Milliseconds() - 1) * 1000
	}
	emit := func(l, r *JoinRow) {
		if c.keeps(l, r) {
			out = append(out, Render(l, r))
		}
	}
	_, pushed := c.Pushed()
	evict := func(wmMs int64) {
		for side := range st {
			s := &st[side]
			var keep joinState
			for i, r := range s.rows {
				if r.TS > limUs(side, wmMs) {
					keep.rows, keep.matched = append(keep.rows, r), append(keep.matched, s.matched[i])
					continue
				}
				if !s.matched[i] && preserves(side) {
					if side == 0 {
						emit(&s.rows[i], nil)
					} else {
						emit(nil, &s.rows[i])
					}
				}
			}
			*s = keep
		}
	}
	dd := [2]*sideDedup{newSideDedup(c.Dedup[0], c.LeftDelay), newSideDedup(c.Dedup[1], c.RightDelay)}
	// batch runs one data batch at watermark wmMs, late by lateMs.
	batch := func(left, right []JoinRow, lateMs, wmMs int64) {
		left, right = dd[0].pass(left, lateMs), dd[1].pass(right, lateMs)
		defer dd[0].evict(wmMs)
		defer dd[1].evict(wmMs)
		for _, l := range left {
			if l.TS <= lateMs*1000 {
				continue
			}
			matched := false
			for j, r := range st[1].rows {
				if inRange(l, r) {
					matched, st[1].matched[j] = true, true
					if !semi {
						emit(&l, &st[1].rows[j])
					}
				}
			}
			if semi && matched {
				emit(&l, nil) // once; a matched left row is not stored
				continue
			}
			if (!l.Null || preserves(0)) && l.TS > limUs(0, wmMs) {
				st[0].rows, st[0].matched = append(st[0].rows, l), append(st[0].matched, matched)
			}
		}
		for _, r := range right {
			if r.TS <= lateMs*1000 {
				continue
			}
			matched := false
			for i, l := range st[0].rows {
				if !inRange(l, r) || semi && st[0].matched[i] {
					continue
				}
				matched, st[0].matched[i] = true, true
				if semi {
					emit(&st[0].rows[i], nil)
				} else {
					emit(&st[0].rows[i], &r)
				}
			}
			if (!r.Null || preserves(1)) && r.TS > limUs(1, wmMs) {
				st[1].rows, st[1].matched = append(st[1].rows, r), append(st[1].matched, matched)
			}
		}
		evict(wmMs)
	}
	wm := int64(0) // ms
	for _, rd := range c.Rounds {
		// A run: its sides' watermarks start afresh; its first batch drops
		// late input by its own watermark (the no-data batch before it, or
		// the batch before at the same watermark).
		mark := [2]int64{}
		seen := [2]bool{}
		late := wm
		for part := range 2 {
			left, right := rd.Left, rd.Right
			if part == 1 {
				left, right = rd.Left2, rd.Right2
				if len(left)+len(right) == 0 {
					break
				}
			}
			batch(left, right, late, wm)
			late = wm
			for side, rows := range [2][]JoinRow{left, right} {
				delay := c.LeftDelay
				if side == 1 {
					delay = c.RightDelay
				}
				for _, r := range rows {
					if !c.advances(pushed, side, r) {
						continue // filtered below the side's watermark
					}
					if w := r.TS/1000 - delay.Milliseconds(); !seen[side] || w > mark[side] {
						mark[side], seen[side] = w, true
					}
				}
			}
			wm = max(wm, min(mark[0], mark[1])) // a side with no row counts 0
		}
		if wm > late {
			evict(wm) // the no-data batch
			dd[0].evict(wm)
			dd[1].evict(wm)
		}
	}
	slices.Sort(out)
	return out
}
