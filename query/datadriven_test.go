package query

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
)

// TestParseScripts runs the parser corpus in testdata/parse (regenerate
// with -rewrite and read the diff). One command:
//
//	parse
//	<query text, may span lines>
//	----
//	the syntax tree (items, source, condition, groups, each with its
//	line:column), or "error: CODE: message" for a refused query
//
// The corpus covers every production of the grammar in doc.go and every
// PARSE_SYNTAX_ERROR and UNSUPPORTED_SQL branch of the parser; each refusal
// must carry a remedy.
func TestParseScripts(t *testing.T) {
	streamtest.Walk(t, "testdata/parse", func(*streamtest.World) streamtest.Commands {
		return streamtest.Commands{"parse": func(w *streamtest.World, d *datadriven.TestData) string {
			src := strings.TrimSuffix(d.Input, "\n")
			q, err := Parse(src)
			if err != nil {
				var e *errcode.Error
				if !errors.As(err, &e) {
					w.T.Fatalf("%s: error without a code: %v", d.Pos, err)
				}
				if e.Remedy == "" {
					w.T.Errorf("%s: %s without a remedy", d.Pos, e.Code)
				}
				return "error: " + e.Code + ": " + e.Msg + "\n"
			}
			return printSelect(src, q)
		}}
	})
}

// printSelect renders a syntax tree one node a line, with positions.
func printSelect(src string, q *Select) string {
	var b strings.Builder
	b.WriteString("select")
	if q.Distinct {
		b.WriteString(" distinct")
	}
	if q.Star {
		b.WriteString(" *")
	}
	b.WriteString("\n")
	for _, it := range q.Items {
		b.WriteString("  " + it.String() + "  @" + position(src, it.Pos) + "\n")
	}
	if q.Sub != nil {
		b.WriteString("from (  @" + position(src, q.FromPos) + "\n")
		for i, sub := range q.Sub {
			if i > 0 {
				b.WriteString("  union all\n")
			}
			for _, l := range strings.Split(strings.TrimSuffix(printSelect(src, sub), "\n"), "\n") {
				b.WriteString("  " + l + "\n")
			}
		}
		b.WriteString(") " + q.SubAlias + "\n")
	} else {
		b.WriteString("from " + q.From + "  @" + position(src, q.FromPos) + "\n")
	}
	if q.Where != nil {
		b.WriteString("where " + q.Where.String() + "\n")
	}
	if len(q.GroupBy) > 0 {
		b.WriteString("group by\n")
	}
	for _, g := range q.GroupBy {
		s := g.String()
		if g.Ordinal != 0 { // -1: ordinal 0, which Compile refuses
			s = "ordinal " + strconv.Itoa(g.Ordinal)
		}
		b.WriteString("  " + s + "  @" + position(src, g.Pos) + "\n")
	}
	if q.Having != nil {
		b.WriteString("having " + q.Having.String() + "\n")
	}
	if len(q.OrderBy) > 0 {
		b.WriteString("order by  @" + position(src, q.OrderPos) + "\n")
	}
	for _, o := range q.OrderBy {
		b.WriteString("  " + o.String() + "  @" + position(src, o.Pos) + "\n")
	}
	if q.Limit != nil {
		b.WriteString("limit " + strconv.FormatInt(*q.Limit, 10) + "  @" + position(src, q.LimitPos) + "\n")
	}
	return b.String()
}
