package query

import (
	"fmt"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestJoinColumns: the columns of each relation a join query reads above
// the join, from its SELECT list and its clauses after ON, qualified,
// unqualified or by the join's name for them; a relation read whole (*,
// rel.*) is nil.
func TestJoinColumns(t *testing.T) {
	schema := func(cols ...string) stream.Schema {
		var s stream.Schema
		for _, c := range cols {
			s.Fields = append(s.Fields, stream.Field{Name: c, Type: stream.Int64})
		}
		return s
	}
	schemas := [2]stream.Schema{schema("k", "ts", "v", "a_only", "source"), schema("k", "ts", "v", "b_only", "source")}
	const from = " FROM l AS a JOIN r AS b ON a.k = b.k"
	side := func(cols []string) string {
		if cols == nil {
			return "*"
		}
		return fmt.Sprint(cols)
	}
	for _, c := range []struct{ q, want string }{
		{"SELECT a.v, b.b_only" + from, "[v] [b_only]"},
		{"SELECT a_only, b.v AS w" + from, "[a_only] [v]"},
		{"SELECT *" + from, "* *"},
		{"SELECT a.*, b.v" + from, "* [v]"},
		{"SELECT a.v" + from + " WHERE b.source = 'x'", "[v] [source]"},
		{"SELECT a.v" + from + " WHERE a_v > b_v", "[v] [v]"},
		{"SELECT a.v, count(*) AS n" + from + " GROUP BY a.v, b_only HAVING max(b.ts) > 0", "[v] [ts b_only]"},
		{"SELECT *" + from + " WHERE a.v > 1", "* *"},
		{"SELECT a.v * 2 AS w" + from, "[v] []"},
		{"SELECT v * 2 AS w" + from + " WHERE a.k > 0", "[k v] [v]"},
	} {
		jq, err := ParseJoin(c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		got := jq.Columns(schemas)
		if g := side(got[0]) + " " + side(got[1]); g != c.want {
			t.Errorf("%s: columns %s, want %s", c.q, g, c.want)
		}
	}
}
