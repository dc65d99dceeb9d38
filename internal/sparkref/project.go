package sparkref

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A projection is a query without an aggregation: SELECT columns FROM
// blocks [WHERE ...] in append mode, each batch appending the rows it
// keeps; drawn here with a deduplication before the SELECT list (Spark's
// Project over Deduplicate; ethstream's --drop-duplicates on a query
// without an aggregation), the WHERE running first as ethstream's read
// path runs it (docs/contracts.md, State: Deduplication).

// Projection generates a projection of one to three columns with a
// deduplication, a WHERE at times and a watermark at times.
func (g *Gen) Projection(rng *rand.Rand) *Query {
	q := &Query{ANSI: rng.IntN(5) != 0, Mode: "append", From: pick(rng, []string{"blocks", g.Source})}
	for range 1 + rng.IntN(3) {
		if c := pick(rng, g.Schema).Name; !containsStr(q.Project, c) {
			q.Project = append(q.Project, c)
		}
	}
	if rng.IntN(2) == 0 {
		q.Watermark, q.WatermarkColumn = pick(rng, []time.Duration{time.Minute, 10 * time.Minute, time.Hour}), g.EventTime
	}
	if rng.IntN(2) == 0 {
		q.Where = g.expr(rng, q, 0)
	}
	for q.Dedup == nil {
		g.Dedup(rng, q)
	}
	return q
}

// renderProjection is Render for a projection.
func (q *Query) renderProjection() string {
	var b strings.Builder
	b.WriteString("SELECT " + strings.Join(q.Project, ", ") + " FROM " + q.From)
	if q.Where != nil {
		b.WriteString(" WHERE ")
		q.Where.render(&b)
	}
	return b.String()
}

// MultisetKey numbers equal rows of an appended table: the n-th row (from
// 0) whose values render as KeyText(vals) is keyed KeyText(vals)#n, so two
// tables compare as multisets.
func MultisetKey(vals []any, seen map[string]int) string {
	k := KeyText(vals)
	n := seen[k]
	seen[k] = n + 1
	return k + "#" + strconv.Itoa(n)
}

// evaluateProjection is Evaluate for a projection: per batch, the rows the
// WHERE keeps, through the deduplication, projected on q.Project.
func evaluateProjection(q *Query, ev *evaluator, batches [][]Row) Result {
	res := Result{Columns: slices.Clone(q.Project)}
	dd := newDedupState(q, ev.idx)
	seen := map[string]int{}
	// wmMs is the batch's watermark, prevMs the previous batch's: the
	// deduplication drops input late by the latter (package doc).
	wmMs, prevMs := int64(0), int64(0)
	for n, batch := range batches {
		ev.codes = ev.codes[:0]
		maxMs, seenTs := int64(math.MinInt64), false
		for _, r := range batch {
			if q.hasWatermark() && ev.pushed(r) {
				if ts := r[ev.idx[q.WatermarkColumn]]; ts != nil {
					maxMs, seenTs = max(maxMs, floorDiv(ts.(int64), 1000)), true
				}
			}
		}
		var out []OutRow
		for _, r := range batch {
			if ev.eval(q.Where, r) != tTrue || !dd.keep(r, prevMs) {
				continue
			}
			vals := make([]any, len(q.Project))
			for i, c := range q.Project {
				vals[i] = r[ev.idx[c]]
			}
			out = append(out, OutRow{Key: MultisetKey(vals, seen), Values: vals})
		}
		if len(ev.codes) > 0 {
			res.Fail = &Failure{Code: ev.codes[0], Codes: slices.Compact(slices.Sorted(slices.Values(ev.codes))), Batch: n}
			return res
		}
		res.Rows = append(res.Rows, out...)
		dd.evict(wmMs)
		prevMs = wmMs
		if seenTs {
			wmMs = max(wmMs, maxMs-q.Watermark.Milliseconds())
		}
	}
	res.Duplicates, res.DedupLate, res.Readmitted = dd.dropped, dd.late, dd.readmitted
	return res
}
