package query

import (
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/stream"
)

// The query over a join's rows. A join query with WHERE, GROUP BY or
// HAVING, or whose SELECT list is more than columns, is two queries in
// one, as Spark plans it: the join, then a one-input query over its rows,
// which the one-input compiler (Compile) resolves against the join's output
// schema. OuterQuery writes that query's text: the SELECT list and the
// clauses after ON as written, each qualified reference rel.col replaced by
// the join's name for that column (col, or alias_col when both relations
// have it), rel.* by the relation's columns, FROM by the name the caller
// registers the join's rows under:
//
//	SELECT x.miner, window(x.block_ts, '1 hour') AS w, count(*) AS txs
//	FROM blocks WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS x
//	JOIN txs WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS y
//	  ON x.hash = y.block_hash AND y.block_ts BETWEEN x.block_ts AND x.block_ts + INTERVAL 1 MINUTE
//	GROUP BY x.miner, window(x.block_ts, '1 hour')
//
// is the join, then SELECT miner, window(x_block_ts, '1 hour') AS w,
// count(*) AS txs FROM <rows> GROUP BY miner, window(x_block_ts, '1 hour').

// joinOuter is the part of a join query over its rows: the token ranges
// of its SELECT list and of the clauses after ON (rest, 0: none).
type joinOuter struct {
	src  string
	toks []token
	sel  [2]int
	rest int
}

// topFrom is the index of the first FROM at parenthesis depth 0 from i,
// -1 without one.
func topFrom(toks []token, i int) int {
	depth := 0
	for ; i < len(toks); i++ {
		switch t := toks[i]; {
		case t.punct("("):
			depth++
		case t.punct(")"):
			depth--
		case depth == 0 && t.is("from"):
			return i
		}
	}
	return -1
}

// Outer reports whether the query has a part over the join's rows.
func (jq *JoinQuery) Outer() bool { return jq.outer != nil }

// OuterQuery is the text of the query over the join's rows, reading FROM
// from, the relations' columns being schemas (each named in the rows by
// OutputName).
//
// renames maps the output columns that are a SELECT item naming a
// qualified column alone (SELECT x.ts) from the join's name (x_ts) to
// Spark's (ts): the caller renames them once the query ran, where no
// other output column has that name.
func (jq *JoinQuery) OuterQuery(from string, schemas [2]stream.Schema) (text string, renames map[string]string, err error) {
	o := jq.outer
	var b strings.Builder
	renames = map[string]string{}
	b.WriteString("SELECT ")
	if err := jq.rewrite(&b, o.sel[0], o.sel[1], renames, schemas); err != nil {
		return "", nil, err
	}
	b.WriteString(" FROM " + quoteIdent(from))
	if o.rest > 0 {
		b.WriteString(" ")
		if err := jq.rewrite(&b, o.rest, len(o.toks)-1, nil, schemas); err != nil {
			return "", nil, err
		}
	}
	return b.String(), renames, nil
}

// rewrite copies the source text of tokens [from, to), qualified
// references replaced; renames, set for the SELECT list, gets the items
// that are a renamed column alone.
func (jq *JoinQuery) rewrite(b *strings.Builder, from, to int, renames map[string]string, schemas [2]stream.Schema) error {
	o := jq.outer
	name := func(side int, col string) (string, bool) { return jq.OutputName(schemas, side, col) }
	if from >= to {
		return nil
	}
	at := o.toks[from].pos
	for i := from; i < to; i++ {
		t := o.toks[i]
		if i+2 >= to || !(t.kind == tIdent || t.kind == tQuoted) || !o.toks[i+1].punct(".") {
			continue
		}
		side := -1
		for s, r := range jq.Rels {
			if strings.EqualFold(t.text, r.Ref()) {
				side = s
			}
		}
		c := o.toks[i+2]
		if side < 0 {
			continue
		}
		var repl string
		switch {
		case c.punct("*"):
			var names []string
			for _, f := range schemas[side].Fields {
				if n, ok := name(side, f.Name); ok {
					names = append(names, quoteIdent(n))
				}
			}
			repl = strings.Join(names, ", ")
		case c.kind == tIdent || c.kind == tQuoted:
			n, ok := name(side, strings.ToLower(c.text))
			if !ok {
				n, ok = name(side, c.text)
			}
			if !ok {
				return errcode.New(CodeUnresolvedColumn, "", "use a column of the join's relations",
					"column %s.%s is not a column of the join's output (at %s)", t.text, c.text, position(o.src, c.pos))
			}
			repl = quoteIdent(n)
			if renames != nil && n != strings.ToLower(c.text) && (i == from || o.toks[i-1].punct(",") || o.toks[i-1].is("distinct")) && (i+3 == to || o.toks[i+3].punct(",")) {
				// A SELECT item that is the column alone: Spark names it
				// col, the join's rows alias_col.
				renames[n] = strings.ToLower(c.text)
			}
		default:
			continue
		}
		b.WriteString(o.src[at:t.pos])
		b.WriteString(repl)
		at = tokenEnd(o.src, c)
		i += 2
	}
	end := len(o.src)
	if to < len(o.toks) {
		end = o.toks[to].pos
	}
	b.WriteString(strings.TrimRight(o.src[at:end], " \t\n;"))
	return nil
}

// tokenEnd is the byte offset after t in src.
func tokenEnd(src string, t token) int {
	switch t.kind {
	case tQuoted:
		if _, n, err := lexQuoted(src, t.pos); err == nil {
			return t.pos + n
		}
	case tEOF:
		return t.pos
	}
	return t.pos + len(t.text)
}

// Pushdown is where a WHERE over the join's rows runs, as Spark's
// optimizer places it (join.Pushdown): where is over the rows' names
// (OutputName), the relations' columns being schemas.
func (jq *JoinQuery) Pushdown(where filter.Expr, schemas [2]stream.Schema, o filter.Options) join.Pushed {
	return join.Pushdown(jq.Type, where, schemas, [2]string{jq.Rels[0].Ref(), jq.Rels[1].Ref()}, o)
}
