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
//     its round's rows in one batch, then no-data batches run until
//     nothing is left to evict.
//   - A row is late, and dropped, when its event time is at or before the
//     watermark of the batch that reads it (ethstream's rule at operator 0;
//     Spark 3.4+ drops by the previous batch's watermark there, and does
//     not store a row already below its side's state watermark:
//     docs/contracts.md, Joins).
//   - The watermark after a batch is the least of the two sides' (each
//     the max event time its run has read minus its delay, 0 until it
//     reads a row, afresh after a restart), never moving back.
//   - The rows emitted once a last round moves both watermarks past every
//     row: each pair of rows not late with equal non-null keys and event
//     times in range; an outer side's rows not late in no pair, with
//     nulls; for a left semi join each left row not late in some pair.
//     The last round's rows (keys SentinelKey...) match nothing and stay
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
type JoinRound struct {
	Left, Right []JoinRow
	Partitions  int
}

// JoinCase is a generated join: a.ts BETWEEN b.ts + Lo AND b.ts + Hi on
// equal keys, each relation with its watermark delay, over its rounds.
type JoinCase struct {
	Type                  string
	LeftDelay, RightDelay time.Duration
	Lo, Hi                time.Duration
	Rounds                []JoinRound
}

// GenJoin draws a case of type typ: 3 to 5 rounds of 4 to 10 rows a side
// around a clock that moves a few minutes a round (a 15-second grid), out of
// order within 3 minutes, one row in eight late by 20 minutes and one in ten with a null
// key (lateFree: delays of an hour, no late row, for a batch engine's
// answer), then the last round far in the future.
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
	for range 3 + rng.IntN(3) {
		c.Rounds = append(c.Rounds, JoinRound{Left: gen(), Right: gen(), Partitions: []int{1, 3, 8}[rng.IntN(3)]})
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
		"ON a.k = b.k AND a.ts BETWEEN b.ts%s AND b.ts%s",
		sel, int64(c.LeftDelay/time.Second), c.Type, int64(c.RightDelay/time.Second), interval(c.Lo), interval(c.Hi))
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
	src := func(glob string) string {
		return fmt.Sprintf("(SELECT * FROM read_parquet('%s') WHERE k IS NULL OR k NOT LIKE '%s%%')", glob, SentinelKey)
	}
	return fmt.Sprintf("SELECT %s FROM %s a %s %s b ON a.k = b.k AND epoch_us(a.ts) BETWEEN epoch_us(b.ts) + %d AND epoch_us(b.ts) + %d",
		sel, src(leftGlob), typ, src(rightGlob), lo, hi)
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

// Oracle is the rows the case's streaming run emits, rendered and sorted
// (package comment of join.go).
func (c JoinCase) Oracle() []string {
	wm := int64(0) // ms
	var L, R []JoinRow
	mark := func(rows []JoinRow, delay time.Duration) int64 {
		m, set := int64(0), false
		for _, r := range rows {
			if w := r.TS/1000 - delay.Milliseconds(); !set || w > m {
				m, set = w, true
			}
		}
		return m // a side with no row counts 0
	}
	for _, rd := range c.Rounds {
		for _, r := range rd.Left {
			if r.TS > wm*1000 {
				L = append(L, r)
			}
		}
		for _, r := range rd.Right {
			if r.TS > wm*1000 {
				R = append(R, r)
			}
		}
		// Every round is a run of one data batch: the sides' watermarks
		// are its rows' alone.
		wm = max(wm, min(mark(rd.Left, c.LeftDelay), mark(rd.Right, c.RightDelay)))
	}
	var out []string
	lm, rm := make([]bool, len(L)), make([]bool, len(R))
	for i := range L {
		for j := range R {
			a, b := L[i], R[j]
			if a.Null || b.Null || a.K != b.K || a.TS < b.TS+c.Lo.Microseconds() || a.TS > b.TS+c.Hi.Microseconds() {
				continue
			}
			lm[i], rm[j] = true, true
			if !c.semi() {
				out = append(out, Render(&a, &b))
			}
		}
	}
	sentinel := func(r JoinRow) bool { return strings.HasPrefix(r.K, SentinelKey) }
	for i := range L {
		switch {
		case sentinel(L[i]):
		case c.semi() && lm[i]:
			out = append(out, Render(&L[i], nil))
		case (c.Type == "LEFT OUTER JOIN" || c.Type == "FULL OUTER JOIN") && !lm[i]:
			out = append(out, Render(&L[i], nil))
		}
	}
	for j := range R {
		if !sentinel(R[j]) && (c.Type == "RIGHT OUTER JOIN" || c.Type == "FULL OUTER JOIN") && !rm[j] {
			out = append(out, Render(nil, &R[j]))
		}
	}
	slices.Sort(out)
	return out
}
