package sparkref

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Gen generates inputs and queries over a schema. EventTime names the
// TIMESTAMP column windows and watermarks use; Source is the name the
// input is registered under (FROM <Source>, or FROM blocks, the view over
// it); SourceCol is the literal column holding that name, when the engine
// adds one ("" for none).
type Gen struct {
	Schema    []Column
	EventTime string
	Source    string
	SourceCol string
	// T0 is the first event time.
	T0 time.Time
}

// big is a BIGINT near 2^62: two of them in one sum leave BIGINT whatever
// the other (small) values of the group, so whether a sum overflows does
// not depend on the order of the additions.
const bigBase = int64(1) << 62

// strVocab are the string values of the inputs: keys that differ only in
// case, escapes Spark's lexer decodes, the empty string (never a null).
var strVocab = []string{"0xaa", "0xbb", "0xAA", "", "a'b", `back\slash`, "é", "tab\tx"}

// Batches generates n batches of rows. Event times advance with jitter,
// a quarter of the rows are out of order, some are late by hours (behind
// any watermark), some null; each other column is null one time in eight,
// and a BIGINT column may hold values near 2^62 (overflowing sums).
func (g *Gen) Batches(rng *rand.Rand, n int) [][]Row {
	now := g.T0.UnixMicro()
	bigCols := map[string]bool{}
	for _, c := range g.Schema {
		if c.Type == stream.Int64 && rng.IntN(4) == 0 {
			bigCols[c.Name] = true
		}
	}
	batches := make([][]Row, n)
	for b := range batches {
		rows := make([]Row, rng.IntN(16))
		for i := range rows {
			// Steps of whole minutes half of the time: event times, window
			// ends and watermarks then meet exactly (end == watermark is late).
			if rng.IntN(2) == 0 {
				now += rng.Int64N(4) * int64(time.Minute/time.Microsecond)
			} else {
				now += rng.Int64N(240)*int64(time.Second/time.Microsecond) + rng.Int64N(3)*rng.Int64N(1000)
			}
			r := make(Row, len(g.Schema))
			for ci, c := range g.Schema {
				r[ci] = g.cell(rng, c, now, bigCols[c.Name])
			}
			rows[i] = r
		}
		batches[b] = rows
	}
	return batches
}

func (g *Gen) cell(rng *rand.Rand, c Column, now int64, bigValues bool) any {
	if c.Name == g.EventTime {
		switch x := rng.IntN(100); {
		case x < 4:
			return nil
		case x < 10: // late by 1-6 hours
			return now - now%int64(time.Minute/time.Microsecond) - (1+rng.Int64N(6))*int64(time.Hour/time.Microsecond) + rng.Int64N(3)*int64(time.Minute/time.Microsecond)
		case x < 25: // out of order by whole minutes
			return now - rng.Int64N(90)*int64(time.Minute/time.Microsecond)
		case x < 35: // out of order within a few minutes, some sub-ms
			return now - rng.Int64N(int64(5*time.Minute/time.Microsecond))
		}
		if rng.IntN(2) == 0 { // on a minute: a window's end, and watermarks meet it
			return now - now%int64(time.Minute/time.Microsecond)
		}
		return now
	}
	if rng.IntN(8) == 0 {
		return nil
	}
	if isNew(c.Type) {
		return newCell(rng, c.Type, g.T0)
	}
	switch c.Type {
	case stream.Int64:
		switch x := rng.IntN(100); {
		case bigValues && x < 25:
			return bigBase + rng.Int64N(1000)
		case x < 60:
			return rng.Int64N(6)
		case x < 70:
			return -rng.Int64N(1000)
		}
		return rng.Int64N(1_000_000)
	case stream.Float64:
		return float64(rng.IntN(2000)-1000) / 8
	case stream.Timestamp:
		return g.T0.UnixMicro() + rng.Int64N(6)*int64(time.Hour/time.Microsecond)
	case stream.String:
		return strVocab[rng.IntN(len(strVocab))]
	}
	panic(fmt.Sprintf("sparkref: column type %v", c.Type))
}

func (g *Gen) cols(t ...stream.Type) []Column {
	var out []Column
	for _, c := range g.Schema {
		for _, x := range t {
			if c.Type == x {
				out = append(out, c)
			}
		}
	}
	return out
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// ZeroDelay redraws the delay of q's watermark, if it has one, as 0 one
// time in four: withWatermark(col, "0 seconds") is a watermark at the max
// event time seen, which drops and evicts as any other. It draws from rng
// alone (a caller passes one of its own), so that a seed's query and
// batches stay those it drew before.
func (g *Gen) ZeroDelay(rng *rand.Rand, q *Query) {
	if q.hasWatermark() && rng.IntN(4) == 0 {
		q.Watermark = 0
	}
}

// Query generates a query over the whole grammar.
func (g *Gen) Query(rng *rand.Rand) *Query {
	q := &Query{ANSI: rng.IntN(5) != 0, Mode: "update"}
	q.From = pick(rng, []string{"blocks", "BLOCKS", "Blocks", g.Source, strings.ToUpper(g.Source)})
	q.spell.upper = rng.IntN(2) == 0
	if rng.IntN(10) < 7 {
		q.Window = g.window(rng, q)
		if rng.IntN(10) < 7 {
			q.Watermark = pick(rng, []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 3 * time.Hour})
			q.WatermarkColumn = g.EventTime
			// Append and complete need a watermark over windows (Spark
			// refuses append without one; ethstream refuses complete).
			q.Mode = pick(rng, []string{"update", "update", "update", "append", "complete"})
		}
	} else {
		switch rng.IntN(4) {
		case 0:
			q.Mode = "complete"
		case 1:
			q.Watermark, q.WatermarkColumn = time.Hour, g.EventTime // closes nothing
		}
	}
	keyCols := append(g.cols(stream.String, stream.Int64, stream.Timestamp), g.newCols()...)
	if g.SourceCol != "" {
		keyCols = append(keyCols, Column{Name: g.SourceCol, Type: stream.String})
	}
	for range rng.IntN(3) {
		c := pick(rng, keyCols)
		if c.Name == g.EventTime && q.Window != nil || containsStr(q.Keys, c.Name) {
			continue
		}
		q.Keys = append(q.Keys, c.Name)
	}
	for i := range 1 + rng.IntN(4) {
		a := g.agg(rng)
		if a.Arg != nil || a.Func == "ratio" || rng.IntN(3) == 0 || containsAgg(q.Aggs, a) {
			a.Alias = pick(rng, []string{"n", "X", "Avg_Tx", "total"}) + strconv.Itoa(i)
		}
		q.Aggs = append(q.Aggs, a)
		f := a.Func
		switch {
		case a.Func == "avg" && rng.IntN(3) == 0:
			f = "mean"
		case a.Func == "count" && a.Column == "" && a.Arg == nil && rng.IntN(2) == 0:
			f = "count(1)"
		case rng.IntN(4) == 0:
			f = strings.ToUpper(f)
		}
		q.spell.funcs = append(q.spell.funcs, f)
	}
	if rng.IntN(10) < 7 {
		q.Where = g.expr(rng, q, 0)
	}
	if rng.IntN(6) == 0 {
		k := int64(rng.IntN(4))
		q.Having = &k
	}
	for i := range rng.IntN(3) / 2 * (1 + rng.IntN(2)) {
		k := KeyExpr{Alias: "gk" + strconv.Itoa(i), ByAlias: rng.IntN(2) == 0}
		if cc := g.castCols(); len(cc) > 0 && rng.IntN(3) == 0 {
			k.Func, k.Column = "str", pick(rng, cc).Name
		} else {
			switch rng.IntN(3) {
			case 0:
				k.Func, k.Column = "lower", pick(rng, g.cols(stream.String)).Name
			case 1:
				k.Func, k.Column = "mod3", pick(rng, g.cols(stream.Int64)).Name
			default:
				k.Func, k.Column = "hour", g.EventTime
			}
		}
		if !slices.ContainsFunc(q.KeyExprs, func(o KeyExpr) bool { return o.Func == k.Func && o.Column == k.Column }) {
			// ethstream resolves a GROUP BY expression to the first SELECT item
			// with its text: the same expression twice is refused
			// (docs/contracts.md).
			q.KeyExprs = append(q.KeyExprs, k)
		}
	}
	head := len(q.Keys)
	if q.Window != nil {
		head++
		q.spell.windowAlias = rng.IntN(3) != 0
		q.spell.groupWindow = rng.IntN(3)
	}
	q.spell.selectOrder = rng.Perm(head)
	for range q.Keys {
		q.spell.keyOrdinal = append(q.spell.keyOrdinal, rng.IntN(4) == 0)
	}
	g.shapes(rng, q)
	return q
}

// shapes draws the query shapes around the aggregation: a subquery in
// FROM with its own WHERE, SELECT DISTINCT (the keys without aggregates),
// and in complete mode ORDER BY and LIMIT.
func (g *Gen) shapes(rng *rand.Rand, q *Query) {
	if rng.IntN(5) == 0 {
		// SELECT * of the view blocks has its source column; of a
		// source, not (a query may group by source).
		q.Sub, q.From = true, pick(rng, []string{"blocks", "BLOCKS", "Blocks"})
		q.SubAlias = pick(rng, []string{"", "t", "AS sub"})
		if rng.IntN(2) == 0 {
			q.SubWhere = g.expr(rng, q, 0)
		}
	}
	if rng.IntN(8) == 0 && (q.Window != nil || len(q.Keys) > 0) {
		q.Distinct = true
		q.Aggs, q.spell.funcs, q.Having, q.KeyExprs = nil, nil, nil, nil
		// DISTINCT's keys are the columns in SELECT order: the keys
		// take the order they are written in, written as before.
		w := 0
		if q.Window != nil {
			w = 1
		}
		var keys []string
		order := make([]int, len(q.spell.selectOrder))
		for i, h := range q.spell.selectOrder {
			if h < w {
				order[i] = 0
				continue
			}
			order[i] = w + len(keys)
			keys = append(keys, q.Keys[h-w])
		}
		q.Keys, q.spell.selectOrder = keys, order
	}
	if q.Mode != "complete" || rng.IntN(2) == 0 {
		return
	}
	// ORDER BY an aliased aggregate (its name is Spark's too), then every
	// group column, so that the order, and what LIMIT keeps, is total.
	for _, a := range q.Aggs {
		if a.Alias != "" && rng.IntN(2) == 0 {
			q.Order = append(q.Order, OrderKey{Column: a.Alias, Desc: rng.IntN(2) == 0})
			break
		}
	}
	if q.Window != nil {
		q.Order = append(q.Order, OrderKey{Column: "window", Desc: rng.IntN(2) == 0})
	}
	for _, k := range q.Keys {
		q.Order = append(q.Order, OrderKey{Column: k, Desc: rng.IntN(2) == 0})
	}
	for _, k := range q.KeyExprs {
		q.Order = append(q.Order, OrderKey{Column: k.Alias, Desc: rng.IntN(2) == 0})
	}
	if rng.IntN(3) != 0 {
		n := int64(1 + rng.IntN(5))
		q.Limit = &n
	}
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func containsAgg(xs []Agg, a Agg) bool {
	for _, x := range xs {
		if x.Name() == a.Name() {
			return true
		}
	}
	return false
}

func (g *Gen) window(rng *rand.Rand, q *Query) *Window {
	size := pick(rng, []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, time.Hour})
	w := &Window{Column: g.EventTime, Size: size, Slide: size}
	switch rng.IntN(4) {
	case 0:
		w.Slide = size / 2
	case 1:
		w.Slide = size / 5
	}
	q.spell.size = spellDuration(rng, w.Size)
	if w.Slide != w.Size || rng.IntN(4) == 0 {
		q.spell.slide = spellDuration(rng, w.Slide)
	}
	if rng.IntN(4) == 0 {
		w.Start = (w.Slide / 3).Truncate(time.Second)
		if w.Start > 0 {
			if q.spell.slide == "" {
				q.spell.slide = spellDuration(rng, w.Slide)
			}
			q.spell.start = spellDuration(rng, w.Start)
		}
	}
	return w
}

// spellDuration writes d in one of Spark's spellings.
func spellDuration(rng *rand.Rand, d time.Duration) string {
	n, unit := int64(d/time.Second), "seconds"
	switch {
	case d%time.Hour == 0 && rng.IntN(2) == 0:
		n, unit = int64(d/time.Hour), "hours"
	case d%time.Minute == 0 && rng.IntN(3) != 0:
		n, unit = int64(d/time.Minute), "minutes"
	}
	switch rng.IntN(5) {
	case 0:
		return fmt.Sprintf("INTERVAL %d %s", n, strings.ToUpper(unit))
	case 1:
		return fmt.Sprintf("INTERVAL '%d' %s", n, strings.ToUpper(strings.TrimSuffix(unit, "s")))
	case 2:
		return fmt.Sprintf("'interval %d %s'", n, unit)
	}
	return fmt.Sprintf("'%d %s'", n, unit)
}

func (g *Gen) agg(rng *rand.Rand) Agg {
	if nc := g.newCols(); len(nc) > 0 && rng.IntN(4) == 0 {
		return g.newAgg(rng, nc)
	}
	switch rng.IntN(8) {
	case 6:
		if rng.IntN(3) == 0 {
			return Agg{Func: "ratio", Column: pick(rng, g.cols(stream.Int64, stream.Float64)).Name}
		}
		return Agg{Func: pick(rng, []string{"sum", "avg", "min", "max", "count"}), Arg: g.arith(rng, 0)}
	case 0:
		return Agg{Func: "count"}
	case 1:
		return Agg{Func: "count", Column: pick(rng, g.Schema).Name}
	case 2:
		return Agg{Func: "sum", Column: pick(rng, g.cols(stream.Int64, stream.Float64)).Name}
	case 3:
		return Agg{Func: "avg", Column: pick(rng, g.cols(stream.Int64, stream.Float64)).Name}
	}
	return Agg{Func: pick(rng, []string{"min", "max"}), Column: pick(rng, g.cols(stream.Int64, stream.Float64, stream.Timestamp)).Name}
}

func (g *Gen) expr(rng *rand.Rand, q *Query, depth int) Expr {
	if depth < 3 {
		switch rng.IntN(7) {
		case 0, 1:
			return And{g.expr(rng, q, depth+1), g.expr(rng, q, depth+1)}
		case 2:
			return Or{g.expr(rng, q, depth+1), g.expr(rng, q, depth+1)}
		case 3:
			if rng.IntN(2) == 0 {
				return Not{g.expr(rng, q, depth+1)}
			}
		}
	}
	if nc := g.newCols(); len(nc) > 0 && rng.IntN(4) == 0 {
		return g.newExpr(rng, nc)
	}
	c := pick(rng, g.cols(stream.String, stream.Int64, stream.Timestamp, stream.Float64))
	col := Col{Name: c.Name}
	if rng.IntN(4) == 0 {
		col.Spell = strings.ToUpper(c.Name)
	} else if rng.IntN(8) == 0 {
		col.Spell = "`" + c.Name + "`"
	}
	op := pick(rng, []string{"=", "==", "<>", "!=", "<", "<=", ">", ">="})
	switch rng.IntN(10) {
	case 8, 9:
		return Cmp{Op: op, L: g.arith(rng, 0), R: g.numLit(rng)}
	case 0:
		return IsNull{X: col, Not: rng.IntN(2) == 0}
	case 1:
		var list []Lit
		for range 1 + rng.IntN(3) {
			list = append(list, g.lit(rng, c, true))
		}
		return In{X: col, List: list, Not: rng.IntN(3) == 0}
	case 2:
		lo, hi := g.lit(rng, c, false), g.lit(rng, c, false)
		return Between{X: col, Lo: lo, Hi: hi, Not: rng.IntN(3) == 0}
	case 3:
		// Two columns of one type.
		others := g.cols(c.Type)
		o := pick(rng, others)
		return Cmp{Op: op, L: col, R: Col{Name: o.Name}}
	case 4:
		return Cmp{Op: op, L: g.lit(rng, c, false), R: col}
	}
	return Cmp{Op: op, L: col, R: g.lit(rng, c, false)}
}

// lit is a literal to compare with column c, of a kind Spark casts to or
// from c's type, in one of its spellings.
func (g *Gen) lit(rng *rand.Rand, c Column, inList bool) Lit {
	if rng.IntN(12) == 0 {
		return Lit{Kind: LitNull, Text: pick(rng, []string{"null", "NULL"})}
	}
	switch c.Type {
	case stream.Int64:
		v := pick(rng, []int64{0, 1, 2, 3, 5, -3, 500, 250_000, bigBase, bigBase + 500, math.MaxInt64})
		switch rng.IntN(7) {
		case 0:
			return Lit{Kind: LitBigint, Int: v, Text: intText(v) + "L"}
		case 1:
			d := new(big.Rat).SetFrac64(2*v+1, 2) // v + 0.5
			if v > math.MaxInt64/4 {
				d = new(big.Rat).SetInt64(v)
				return Lit{Kind: LitDecimal, Dec: d.Add(d, big.NewRat(1, 1)), Text: new(big.Int).Add(big.NewInt(v), big.NewInt(1)).String()}
			}
			return Lit{Kind: LitDecimal, Dec: d, Text: d.FloatString(1)}
		case 2:
			return Lit{Kind: LitDecimal, Dec: new(big.Rat).SetInt64(v), Text: intText(v) + pick(rng, []string{".0", "BD"})}
		case 3: // in an IN list, a DOUBLE makes the whole list compare as doubles
			return Lit{Kind: LitDouble, Float: float64(v), Text: strconv.FormatFloat(float64(v), 'e', -1, 64)}
		case 4:
			return Lit{Kind: LitString, Str: strconv.FormatInt(v, 10), Text: "'" + strconv.FormatInt(v, 10) + "'"}
		}
		return Lit{Kind: LitBigint, Int: v, Text: intText(v)}
	case stream.Float64:
		v := float64(rng.IntN(2000)-1000) / 8
		return Lit{Kind: LitDouble, Float: v, Text: strconv.FormatFloat(v, 'e', -1, 64)}
	case stream.Timestamp:
		t := g.T0.Add(time.Duration(rng.IntN(5*60)) * time.Minute)
		switch rng.IntN(4) {
		case 0:
			return Lit{Kind: LitTimestamp, Int: t.UnixMicro(), Text: "TIMESTAMP '" + t.Format("2006-01-02 15:04:05") + "'"}
		case 1:
			d := t.Truncate(24 * time.Hour)
			return Lit{Kind: LitDate, Int: d.UnixMicro(), Text: "DATE '" + d.Format("2006-01-02") + "'"}
		}
		return Lit{Kind: LitString, Str: t.Format("2006-01-02 15:04:05"), Text: "'" + t.Format("2006-01-02 15:04:05") + "'"}
	case stream.String:
		s := strVocab[rng.IntN(len(strVocab))]
		return Lit{Kind: LitString, Str: s, Text: quoteSQL(rng, s)}
	}
	panic(fmt.Sprintf("sparkref: literal for %v", c.Type))
}

func intText(v int64) string {
	if v < 0 {
		return "-" + strconv.FormatInt(-v, 10)
	}
	return strconv.FormatInt(v, 10)
}

// quoteSQL writes s as a Spark string literal: escapes as Spark's lexer
// decodes them, sometimes split into adjacent literals, sometimes \u.
func quoteSQL(rng *rand.Rand, s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i, r := range s {
		if i > 0 && rng.IntN(6) == 0 {
			b.WriteString("' '")
		}
		switch {
		case r == '\'':
			b.WriteString(`\'`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\t':
			b.WriteString(`\t`)
		case r > 127 || rng.IntN(10) == 0:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// arith is a numeric expression over the BIGINT and DOUBLE columns and
// small literals (zero among them: a division by zero), with values near
// 2^62 in the inputs (an overflow), nested up to three deep.
func (g *Gen) arith(rng *rand.Rand, depth int) Operand {
	side := func() Operand {
		if depth < 2 && rng.IntN(3) == 0 {
			return g.arith(rng, depth+1)
		}
		if rng.IntN(3) == 0 {
			return g.numLit(rng)
		}
		return Col{Name: pick(rng, g.cols(stream.Int64, stream.Float64)).Name}
	}
	if rng.IntN(6) == 0 {
		return Coalesce{X: Col{Name: pick(rng, g.cols(stream.Int64, stream.Float64)).Name}, Else: g.numLit(rng)}
	}
	l := side()
	if _, isLit := l.(Lit); isLit {
		l = Col{Name: pick(rng, g.cols(stream.Int64, stream.Float64)).Name} // every expression reads a column
	}
	return Arith{Op: pick(rng, []string{"+", "-", "*", "/", "%"}), L: l, R: side()}
}

// numLit is a small integer literal (0 included) or a double.
func (g *Gen) numLit(rng *rand.Rand) Lit {
	if rng.IntN(4) == 0 {
		v := float64(rng.IntN(20)-10) / 4
		return Lit{Kind: LitDouble, Float: v, Text: strconv.FormatFloat(v, 'e', -1, 64)}
	}
	v := int64(rng.IntN(7) - 2)
	return Lit{Kind: LitBigint, Int: v, Text: intText(v)}
}
