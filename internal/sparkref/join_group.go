package sparkref

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// GroupSQL is the case followed by an aggregation, in append mode: per
// window of size of the left relation's event time, the joined rows
// (count(*)) and the right relation's rows among them (count(b.id)); a
// left semi join counts its rows only (n, and m = n).
func (c JoinCase) GroupSQL(size time.Duration) string {
	m := "count(b.id)"
	if c.semi() {
		m = "count(a.id)"
	}
	w := fmt.Sprintf("window(a.ts, '%d seconds')", int64(size/time.Second))
	return fmt.Sprintf("SELECT %s, count(*) AS n, %s AS m FROM lhs WATERMARK ts DELAY OF INTERVAL %d SECONDS AS a %s rhs WATERMARK ts DELAY OF INTERVAL %d SECONDS AS b "+
		"ON a.k = b.k AND a.ts BETWEEN b.ts%s AND b.ts%s%s GROUP BY %s",
		w, m, int64(c.LeftDelay/time.Second), c.Type, int64(c.RightDelay/time.Second), interval(c.Lo), interval(c.Hi), c.whereSQL(), w)
}

// GroupOracle is GroupSQL's answer, from Oracle's rows: "start n m" per
// window (start in µs), sorted; a right outer or full outer join's rows
// without a left one have no window and count nowhere (Spark's window of
// a null time is null, and the aggregation drops it).
func (c JoinCase) GroupOracle(size time.Duration) []string {
	type nm struct{ n, m int }
	win := map[int64]nm{}
	us := size.Microseconds()
	for _, row := range c.Oracle() {
		l, r, _ := strings.Cut(row, "|")
		f := strings.Split(l, ",")
		if f[1] == "null" {
			continue
		}
		ts, _ := strconv.ParseInt(f[1], 10, 64)
		start := ts - ((ts%us)+us)%us
		x := win[start]
		x.n++
		if c.semi() || !strings.HasPrefix(r, "null,") {
			x.m++
		}
		win[start] = x
	}
	var out []string
	for s, x := range win {
		out = append(out, fmt.Sprintf("%d %d %d", s, x.n, x.m))
	}
	slices.Sort(out)
	return out
}
