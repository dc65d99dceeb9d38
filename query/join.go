package query

import (
	"strings"
	"time"

	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/stream"
)

// A stream-stream join in SQL, as Databricks SQL writes one with
// per-relation watermarks:
//
//	SELECT x.hash, x.block_ts, y.value AS value
//	FROM blocks WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS x
//	LEFT OUTER JOIN txs WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS y
//	  ON x.hash = y.block_hash AND y.block_ts BETWEEN x.block_ts AND x.block_ts + INTERVAL 10 MINUTES
//
// Each relation names one source (--source NAME=...), or several unioned
// as Spark SQL writes a union in FROM, under an alias:
//
//	FROM (SELECT * FROM a1 UNION ALL SELECT * FROM a2) WATERMARK ts DELAY OF INTERVAL 1 HOUR AS x
//
// (each name a --source; the engine keeps each one's offsets, so source
// evolution adds and removes them on either side). The join types are
// [INNER] JOIN, LEFT [OUTER] JOIN, RIGHT [OUTER] JOIN, FULL [OUTER] JOIN
// and LEFT SEMI JOIN; ON is a conjunction of equalities between a column of
// each side (the equi-join keys) and time bounds between their timestamps
// (a.ts BETWEEN b.ts [± INTERVAL] AND b.ts [± INTERVAL], or a comparison
// <, <=, >, >= of two such terms). The SELECT list is *, x.*, or columns
// (qualified, or unqualified when only one side has them) with aliases.
// WHERE, GROUP BY, HAVING and a SELECT list of expressions make the rest
// of the query one over the join's rows, compiled as a one-input query
// (join_outer.go): a windowed aggregation after the join, as Spark plans
// several stateful operators.

// JoinQuery is a parsed stream-stream join.
type JoinQuery struct {
	Type join.Type
	// Rels are the left and the right relation.
	Rels [2]JoinRel
	// LeftKeys and RightKeys are the equi-join columns, paired.
	LeftKeys, RightKeys []string
	// Range is the time-range condition, with the left relation's columns
	// on the left of each bound.
	Range []join.Bound
	// Items is the SELECT list; Star is SELECT *.
	Items []JoinItem
	Star  bool
	// outer, when set, is the query over the join's rows (WHERE, GROUP
	// BY, HAVING, a SELECT list of expressions): join_outer.go.
	outer *joinOuter
}

// JoinRel is one relation of a join: its sources, alias and watermark.
type JoinRel struct {
	// Name is the relation's one source ("" for a union of sources);
	// Sources every source it reads, in the order written.
	Name, Alias string
	Sources     []string
	// Watermark is the WATERMARK clause's column ("" without), Delay its
	// DELAY OF interval.
	Watermark string
	Delay     time.Duration
	Pos       int
}

// Ref names the relation in the query: its alias, else its name.
func (r JoinRel) Ref() string {
	if r.Alias != "" {
		return r.Alias
	}
	return r.Name
}

// OutputName is the name in the join's rows of column col of relation side
// (stream.LeftSide or RightSide), the relations' columns being schemas:
// join.OutputName, the relations named by Ref. false: the rows do not carry
// it.
func (jq *JoinQuery) OutputName(schemas [2]stream.Schema, side int, col string) (string, bool) {
	return join.OutputName(jq.Type, schemas, [2]string{jq.Rels[0].Ref(), jq.Rels[1].Ref()}, side, col)
}

// JoinItem is one SELECT item of a join: a side's column (Side -1: an
// unqualified one, resolved against the schemas), or every column of a
// side (All).
type JoinItem struct {
	Side int
	Col  string
	As   string
	All  bool
	Pos  int
}

// IsJoin reports whether src is a join query: a JOIN after its FROM.
func IsJoin(src string) bool {
	toks, err := lex(src)
	if err != nil {
		return false
	}
	from := false
	for _, t := range toks {
		if t.is("from") {
			from = true
		}
		if from && t.is("join") {
			return true
		}
	}
	return false
}

// ParseJoin parses a join query (IsJoin).
func ParseJoin(src string) (*JoinQuery, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	if err := p.expectKeyword("select"); err != nil {
		return nil, err
	}
	jq := &JoinQuery{}
	// The SELECT list is parsed as the join's own (columns and aliases);
	// one the one-input compiler must read (expressions, aggregates,
	// DISTINCT) makes the query an outer one over the join's rows
	// (join_outer.go).
	selStart, fromAt := p.i, topFrom(toks, p.i)
	if fromAt < 0 {
		return nil, p.errAt(toks[len(toks)-1], "expected FROM")
	}
	raw, star, err := p.joinItems()
	if err != nil || p.i != fromAt {
		raw, star = nil, false
		jq.outer = &joinOuter{src: src, toks: toks, sel: [2]int{selStart, fromAt}}
		p.i = fromAt
	}
	jq.Star = star
	if jq.Star && len(raw) > 0 {
		return nil, p.errAt(p.peek(), "SELECT * with other items in a join: list the columns, or use x.*")
	}
	if err := p.expectKeyword("from"); err != nil {
		return nil, err
	}
	if jq.Rels[0], err = p.joinRel(); err != nil {
		return nil, err
	}
	if jq.Type, err = p.joinType(); err != nil {
		return nil, err
	}
	if jq.Rels[1], err = p.joinRel(); err != nil {
		return nil, err
	}
	if strings.EqualFold(jq.Rels[0].Ref(), jq.Rels[1].Ref()) {
		return nil, syntaxErr(src, jq.Rels[1].Pos, "both relations of the join are called %s: give one an alias (AS y)", jq.Rels[1].Ref())
	}
	for _, a := range jq.Rels[0].Sources {
		for _, b := range jq.Rels[1].Sources {
			if strings.EqualFold(a, b) {
				return nil, unsupported(src, jq.Rels[1].Pos, "source "+b+" read by both relations of the join (a self-join: each source belongs to one relation)")
			}
		}
	}
	side := func(qual string, pos int) (int, error) {
		for i, r := range jq.Rels {
			if strings.EqualFold(qual, r.Ref()) {
				return i, nil
			}
		}
		return 0, syntaxErr(src, pos, "%s is neither relation of the join (%s, %s)", qual, jq.Rels[0].Ref(), jq.Rels[1].Ref())
	}
	for _, ri := range raw {
		if ri.qual != "" {
			s, err := side(ri.qual, ri.it.Pos)
			if err != nil {
				return nil, err
			}
			ri.it.Side = s
		}
		jq.Items = append(jq.Items, ri.it)
	}
	if err := p.expectKeyword("on"); err != nil {
		return nil, err
	}
	if err := p.joinCondition(jq, side); err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		if t.is("where") || t.is("group") || t.is("having") {
			// WHERE, GROUP BY and HAVING over the join's rows: the
			// one-input compiler's, after the join (join_outer.go).
			if jq.outer == nil {
				jq.outer = &joinOuter{src: src, toks: toks, sel: [2]int{selStart, fromAt}}
			}
			jq.outer.rest = p.i
			return jq, nil
		}
		if t.is("join") || t.is("left") || t.is("inner") || t.is("right") || t.is("full") {
			return nil, unsupported(src, t.pos, strings.ToUpper(t.text)+" after a stream-stream join (a query joins two relations)")
		}
		return nil, p.errAt(t, "unexpected %s after the join condition", t)
	}
	return jq, nil
}

// rawItem is a SELECT item of a join as written: its relation qualifier
// and the item.
type rawItem struct {
	qual string
	it   JoinItem
}

// joinItems reads a join's own SELECT list: *, rel.*, rel.col and col,
// each with an alias.
func (p *parser) joinItems() ([]rawItem, bool, error) {
	var raw []rawItem
	star := false
	for {
		t := p.peek()
		switch {
		case t.punct("*"):
			p.next()
			star = true
		default:
			name, nt, err := p.ident("a column, rel.column, rel.* or *")
			if err != nil {
				return nil, false, err
			}
			ri := rawItem{it: JoinItem{Side: -1, Pos: nt.pos}}
			if p.peek().punct(".") {
				p.next()
				ri.qual = name
				if p.peek().punct("*") {
					p.next()
					ri.it.All = true
				} else if ri.it.Col, _, err = p.column("a column after " + name + "."); err != nil {
					return nil, false, err
				}
			} else {
				ri.it.Col = strings.ToLower(name)
			}
			if !ri.it.All {
				if a := p.peek(); a.is("as") {
					p.next()
					if ri.it.As, _, err = p.ident("an alias after AS"); err != nil {
						return nil, false, err
					}
				} else if a.kind == tQuoted || a.kind == tIdent && !reserved[strings.ToLower(a.text)] {
					ri.it.As, _, _ = p.ident("an alias")
				}
			}
			raw = append(raw, ri)
		}
		if !p.peek().punct(",") {
			return raw, star, nil
		}
		p.next()
	}
}

// joinRel reads NAME [WATERMARK col DELAY OF interval] [[AS] alias], or
// (SELECT * FROM NAME [UNION ALL SELECT * FROM NAME ...]) in NAME's place,
// with an alias.
func (p *parser) joinRel() (JoinRel, error) {
	var r JoinRel
	if open := p.peek(); open.punct("(") {
		p.next()
		names, err := p.unionOfSources()
		if err != nil {
			return r, err
		}
		r = JoinRel{Sources: names, Pos: open.pos}
	} else {
		name, t, err := p.ident("a source name")
		if err != nil {
			return JoinRel{}, err
		}
		r = JoinRel{Name: name, Sources: []string{name}, Pos: t.pos}
	}
	var err error
	if p.peek().is("watermark") {
		p.next()
		if r.Watermark, _, err = p.column("the watermark's event-time column"); err != nil {
			return r, err
		}
		if err := p.expectKeyword("delay"); err != nil {
			return r, err
		}
		if err := p.expectKeyword("of"); err != nil {
			return r, err
		}
		if r.Delay, err = p.duration(); err != nil {
			return r, err
		}
	}
	if a := p.peek(); a.is("as") {
		p.next()
		r.Alias, _, err = p.ident("an alias after AS")
	} else if a.kind == tQuoted || a.kind == tIdent && !reserved[strings.ToLower(a.text)] && !a.is("semi") && !a.is("anti") {
		r.Alias, _, err = p.ident("an alias")
	}
	if err == nil && r.Name == "" && r.Alias == "" {
		return r, unsupported(p.src, r.Pos, "a union of sources in a join without an alias (a union needs an alias: (SELECT * FROM a1 UNION ALL SELECT * FROM a2) AS x)")
	}
	return r, err
}

// unionOfSources reads SELECT * FROM NAME [UNION ALL SELECT * FROM NAME
// ...] and the closing parenthesis: the sources of one relation of a join.
// Anything else in the parentheses (columns, a WHERE, UNION without ALL)
// is not supported: a relation is its sources' rows as they are.
func (p *parser) unionOfSources() ([]string, error) {
	var names []string
	for {
		if t := p.peek(); t.punct("(") {
			// ((SELECT ...) UNION ALL (SELECT ...)) is Spark SQL too.
			return nil, unsupported(p.src, t.pos, "a parenthesized query in a join's relation (write SELECT * FROM source [UNION ALL SELECT * FROM source ...])")
		}
		if err := p.expectKeyword("select"); err != nil {
			return nil, err
		}
		if t := p.peek(); !t.punct("*") {
			return nil, unsupported(p.src, t.pos, "a subquery in a join other than SELECT * FROM source [UNION ALL SELECT * FROM source ...]")
		}
		p.next()
		if err := p.expectKeyword("from"); err != nil {
			return nil, err
		}
		name, nt, err := p.ident("a source name")
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if strings.EqualFold(n, name) {
				return nil, unsupported(p.src, nt.pos, "source "+name+" unioned twice in one relation")
			}
		}
		names = append(names, name)
		switch t := p.next(); {
		case t.punct(")"):
			return names, nil
		case t.is("union") && p.peek().is("all"):
			p.next()
		case t.is("union"):
			return nil, unsupported(p.src, t.pos, "UNION without ALL in a join's relation (its sources are unioned as UNION ALL)")
		default:
			return nil, unsupported(p.src, t.pos, "a subquery in a join other than SELECT * FROM source [UNION ALL SELECT * FROM source ...]")
		}
	}
}

// joinType reads the join's type up to JOIN.
func (p *parser) joinType() (join.Type, error) {
	t := p.next()
	typ := join.Inner
	switch {
	case t.is("join"):
		return join.Inner, nil
	case t.is("inner"):
	case t.is("left"):
		typ = join.LeftOuter
		if s := p.peek(); s.is("semi") {
			p.next()
			typ = join.LeftSemi
		} else if s.is("anti") {
			return 0, unsupported(p.src, s.pos, "LEFT ANTI JOIN between two streams (Spark: LeftAnti joins with a streaming DataFrame/Dataset on the right are not supported)")
		}
	case t.is("right"):
		typ = join.RightOuter
	case t.is("full"):
		typ = join.FullOuter
	case t.is("cross"), t.is("natural"):
		return 0, unsupported(p.src, t.pos, strings.ToUpper(t.text)+" JOIN between two streams")
	default:
		return 0, p.errAt(t, "expected JOIN, INNER JOIN, LEFT [OUTER|SEMI] JOIN, RIGHT [OUTER] JOIN or FULL [OUTER] JOIN, found %s", t)
	}
	if typ != join.Inner && typ != join.LeftSemi && p.peek().is("outer") {
		p.next()
	}
	return typ, p.expectKeyword("join")
}

// timeTerm is rel.col [(+|-) INTERVAL ...].
type timeTerm struct {
	side int
	col  string
	off  time.Duration
}

// joinRef reads rel.col.
func (p *parser) joinRef(side func(string, int) (int, error)) (int, string, error) {
	q, t, err := p.ident("rel.column")
	if err != nil {
		return 0, "", err
	}
	if _, err := p.expectPunct("."); err != nil {
		return 0, "", syntaxErr(p.src, t.pos, "qualify the join condition's columns with their relation (x.%s)", strings.ToLower(q))
	}
	s, err := side(q, t.pos)
	if err != nil {
		return 0, "", err
	}
	c, _, err := p.column("a column")
	return s, c, err
}

func (p *parser) timeTerm(side func(string, int) (int, error)) (timeTerm, error) {
	s, c, err := p.joinRef(side)
	if err != nil {
		return timeTerm{}, err
	}
	tt := timeTerm{side: s, col: c}
	for {
		t := p.peek()
		if !t.punct("+") && !t.punct("-") {
			return tt, nil
		}
		p.next()
		d, err := p.duration()
		if err != nil {
			return tt, err
		}
		if t.punct("-") {
			d = -d
		}
		tt.off += d
	}
}

// bound makes the Bound l OP r, whichever sides they are on (the left
// relation's term goes left).
func bound(src string, pos int, l timeTerm, op join.Op, r timeTerm) (join.Bound, error) {
	if l.side == r.side {
		return join.Bound{}, syntaxErr(src, pos, "a time bound compares a column of each relation")
	}
	if l.side == 1 {
		l, r = r, l
		op = map[join.Op]join.Op{join.LT: join.GT, join.LE: join.GE, join.GT: join.LT, join.GE: join.LE}[op]
	}
	return join.Bound{LeftColumn: l.col, LeftOffset: l.off, Op: op, RightColumn: r.col, RightOffset: r.off}, nil
}

// joinCondition reads ON's conjunction.
func (p *parser) joinCondition(jq *JoinQuery, side func(string, int) (int, error)) error {
	for {
		start := p.peek()
		l, err := p.timeTerm(side)
		if err != nil {
			return err
		}
		t := p.next()
		switch {
		case t.punct("="), t.punct("=="):
			r, err := p.timeTerm(side)
			if err != nil {
				return err
			}
			if l.off != 0 || r.off != 0 || l.side == r.side {
				return unsupported(p.src, start.pos, "an equality other than between a column of each relation in a join condition")
			}
			if l.side == 1 {
				l, r = r, l
			}
			jq.LeftKeys, jq.RightKeys = append(jq.LeftKeys, l.col), append(jq.RightKeys, r.col)
		case t.is("between"):
			lo, err := p.timeTerm(side)
			if err != nil {
				return err
			}
			if err := p.expectKeyword("and"); err != nil {
				return err
			}
			hi, err := p.timeTerm(side)
			if err != nil {
				return err
			}
			b1, err := bound(p.src, start.pos, l, join.GE, lo)
			if err != nil {
				return err
			}
			b2, err := bound(p.src, start.pos, l, join.LE, hi)
			if err != nil {
				return err
			}
			jq.Range = append(jq.Range, b1, b2)
		case t.punct("<"), t.punct("<="), t.punct(">"), t.punct(">="):
			op := map[string]join.Op{"<": join.LT, "<=": join.LE, ">": join.GT, ">=": join.GE}[t.text]
			r, err := p.timeTerm(side)
			if err != nil {
				return err
			}
			b, err := bound(p.src, start.pos, l, op, r)
			if err != nil {
				return err
			}
			jq.Range = append(jq.Range, b)
		default:
			return p.errAt(t, "expected =, BETWEEN, <, <=, > or >= in the join condition, found %s", t)
		}
		if !p.peek().is("and") {
			return nil
		}
		p.next()
	}
}
