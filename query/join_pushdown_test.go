package query

import (
	"testing"

	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/stream"
)

// pushdownOf parses a join with a WHERE over relations a and b of (k
// STRING, ts TIMESTAMP, id BIGINT) and returns where the WHERE runs.
func pushdownOf(t *testing.T, sql string) join.Pushed {
	t.Helper()
	jq, err := ParseJoin(sql)
	if err != nil {
		t.Fatal(err)
	}
	rel := stream.Schema{Fields: []stream.Field{{Name: "k", Type: stream.String, Nullable: true},
		{Name: "ts", Type: stream.Timestamp}, {Name: "id", Type: stream.Int64, Nullable: true}}}
	schemas := [2]stream.Schema{rel, rel}
	var joined stream.Schema
	for side := range schemas {
		for _, f := range schemas[side].Fields {
			if n, ok := jq.OutputName(schemas, side, f.Name); ok {
				f.Name = n
				joined.Fields = append(joined.Fields, f)
			}
		}
	}
	text, _, err := jq.OuterQuery("joined", schemas)
	if err != nil {
		t.Fatal(err)
	}
	qc, err := Compile(text, Options{OutputMode: "append", Sources: []string{"joined"}, Schemas: []stream.Schema{joined},
		Relations: []Relation{{Name: "joined", Sources: []int{0}}}})
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return jq.Pushdown(qc.Where.Expr(), schemas, filter.Options{})
}

// TestJoinPushdown: Spark's EliminateOuterJoin and PushPredicateThroughJoin
// for each join type: the join type that runs, the conjuncts pushed into
// each side (renamed to the side's columns) and the ones left above.
func TestJoinPushdown(t *testing.T) {
	str := func(e filter.Expr) string {
		if e == nil {
			return "-"
		}
		return e.String()
	}
	for _, c := range []struct {
		typ, where string
		want       join.Type
		left       string
		right      string
		rest       string
	}{
		// Inner: each side's conjuncts into it, a mixed one above.
		{"JOIN", "a.id > 5 AND b.k = 'x' AND a.id < b.id", join.Inner, "(id > 5)", "(k = 'x')", "(a_id < b_id)"},
		// Left outer: the left side's pushed, the right side's stays.
		{"LEFT OUTER JOIN", "a.id > 5 AND b.id IS NULL", join.LeftOuter, "(id > 5)", "-", "(b_id is null)"},
		// ... unless it rejects the right side's nulls: inner.
		{"LEFT OUTER JOIN", "a.id > 5 AND b.id > 7", join.Inner, "(id > 5)", "(id > 7)", "-"},
		{"LEFT OUTER JOIN", "b.k IS NOT NULL", join.Inner, "-", "(k is not null)", "-"},
		// A comparison of both sides infers IS NOT NULL of each.
		{"LEFT OUTER JOIN", "a.id < b.id + 3", join.Inner, "-", "-", "(a_id < (b_id + 3))"},
		// An OR is not null-intolerant; IS NULL OR keeps the nulls.
		{"LEFT OUTER JOIN", "(a.k = 'x' OR b.k = 'y') AND (b.k IS NULL OR b.k <> 'z')", join.LeftOuter, "-", "-",
			"(((a_k = 'x') or (b_k = 'y')) and ((b_k is null) or (b_k <> 'z')))"},
		{"RIGHT OUTER JOIN", "a.id > 5", join.Inner, "(id > 5)", "-", "-"},
		{"RIGHT OUTER JOIN", "b.id > 5 AND a.id IS NULL", join.RightOuter, "-", "(id > 5)", "(a_id is null)"},
		// Full outer: nothing pushed, unless a side's nulls are rejected.
		{"FULL OUTER JOIN", "a.id IS NULL OR b.id IS NULL", join.FullOuter, "-", "-", "((a_id is null) or (b_id is null))"},
		{"FULL OUTER JOIN", "a.id % 2 = 0", join.LeftOuter, "((id % 2) = 0)", "-", "-"},
		{"FULL OUTER JOIN", "b.ts >= '2026-01-01'", join.RightOuter, "-", "(ts >= '2026-01-01')", "-"},
		{"FULL OUTER JOIN", "a.id > 1 AND b.id > 2", join.Inner, "(id > 1)", "(id > 2)", "-"},
	} {
		sql := "SELECT * FROM a WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS a " + c.typ + " b WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS b " +
			"ON a.k = b.k AND a.ts BETWEEN b.ts AND b.ts + INTERVAL 1 MINUTE WHERE " + c.where
		pd := pushdownOf(t, sql)
		if pd.Type != c.want || str(pd.Sides[0]) != c.left || str(pd.Sides[1]) != c.right || str(pd.Rest) != c.rest {
			t.Errorf("%s WHERE %s:\n got %s, left %s, right %s, above %s\nwant %s, left %s, right %s, above %s",
				c.typ, c.where, pd.Type, str(pd.Sides[0]), str(pd.Sides[1]), str(pd.Rest), c.want, c.left, c.right, c.rest)
		}
	}
	semi := pushdownOf(t, "SELECT a.* FROM a WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS a LEFT SEMI JOIN b WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS b "+
		"ON a.k = b.k AND a.ts BETWEEN b.ts AND b.ts + INTERVAL 1 MINUTE WHERE a.id > 3 AND a.k <> 'x'")
	if semi.Type != join.LeftSemi || str(semi.Sides[0]) != "((id > 3) and (k <> 'x'))" || semi.Sides[1] != nil || semi.Rest != nil {
		t.Errorf("left semi: %+v", semi)
	}
}
