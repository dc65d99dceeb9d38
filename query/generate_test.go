package query

import (
	"slices"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/stream"
)

func logsOptions() Options {
	return Options{Sources: []string{"logs"}, Schemas: []stream.Schema{ethtables.StreamSchema(ethtables.Logs)}, OutputMode: "append"}
}

// TestGeneratorPlans: a generator in a stateless SELECT becomes a
// generate step (after a derive when its array is an expression) and a
// projection in SELECT order; under an aggregation in a subquery its
// column is a group key.
func TestGeneratorPlans(t *testing.T) {
	for _, c := range []struct{ q, steps, schema string }{
		{"select address, explode(topics) as t, block_number from logs",
			"generate explode(topics) as t | select address, t, block_number", "address string, t string null, block_number int64"},
		{"select posexplode_outer(topics) from logs",
			"generate posexplode_outer(topics) as (pos, col) | select pos, col", "pos int null, col string null"},
		{"select explode(split(data, 'a')) from logs where log_index > 2",
			"derive split(data, 'a') as __generator_input | generate explode(__generator_input) as col | select col", "col string null"},
		{"select log_index, topics[0] as ev, size(topics) as n from logs",
			"derive topics[0] as ev, size(topics) as n | select log_index, ev, n", "log_index int64, ev string null, n int null"},
		{"select log_index, topics[1] as t1 from logs",
			"derive topics[1] as t1 | select log_index, t1", "log_index int64, t1 string null"},
		{"select element_at(topics, -1) as last, explode_outer(topics) as t from logs where size(topics) > 1",
			"derive element_at(topics, -1) as last | generate explode_outer(topics) as t | select last, t", "last string null, t string null"},
		{"select t, count(*) as n from (select explode(topics) as t from logs) group by t",
			"generate explode(topics) as t | select t | aggregate by (t): count(*) as n", "t string null, n int64 (key: t)"},
	} {
		o := logsOptions()
		if strings.Contains(c.q, "group by") {
			o.OutputMode = "update"
		}
		cq, err := Compile(c.q, o)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		var steps []string
		for _, s := range cq.Steps {
			steps = append(steps, s.String())
		}
		if got := strings.Join(steps, " | "); got != c.steps {
			t.Errorf("%s: steps %q, want %q", c.q, got, c.steps)
		}
		if got := cq.Schema.String(); got != c.schema {
			t.Errorf("%s: schema %q, want %q", c.q, got, c.schema)
		}
		// The read path keeps every column the steps read.
		for _, s := range cq.Steps {
			for _, d := range s.Derive {
				for _, col := range d.Expr.Columns() {
					if cq.Select != nil && !slices.Contains(cq.Select, col) {
						t.Errorf("%s: the read path keeps %v, the step %s reads %s", c.q, cq.Select, s, col)
					}
				}
			}
			if g := s.Generate; g != nil && cq.Select != nil && g.Column != genInput && !slices.Contains(cq.Select, g.Column) {
				t.Errorf("%s: the read path keeps %v, the generator reads %s", c.q, cq.Select, g.Column)
			}
		}
	}
}

// TestGeneratorRefusals: Spark's UNSUPPORTED_GENERATOR classes, a
// generator of a non-array, and one in an aggregating query.
func TestGeneratorRefusals(t *testing.T) {
	for _, c := range []struct{ q, code string }{
		{"select explode(topics) as a, explode(topics) as b from logs", "UNSUPPORTED_GENERATOR.MULTI_GENERATOR"},
		{"select size(explode(topics)) from logs", "UNSUPPORTED_GENERATOR.NESTED_IN_EXPRESSIONS"},
		{"select address from logs where explode(topics) = 'x'", "UNSUPPORTED_GENERATOR.OUTSIDE_SELECT"},
		{"select explode(address) from logs", "DATATYPE_MISMATCH"},
		{"select explode(topics) as t, count(*) as n from logs group by address", CodeUnsupported},
		{"select explode(topics, topics) from logs", "WRONG_NUM_ARGS"},
		{"select topics[0] from logs", CodeInvalidQuery},
		{"select topics[0] as address from logs", CodeInvalidQuery},
		{"select topics, count(*) as n from logs group by topics", CodeArrayGroupKey},
		{"select distinct topics from logs", CodeArrayGroupKey},
		{"select max(topics) as m from logs", CodeInvalidQuery},
		{"select max(split(data, 'a')) as m from logs", CodeInvalidQuery},
		{"select split(data, 'a') as p, count(*) as n from logs group by split(data, 'a')", CodeArrayGroupKey},
	} {
		_, err := Compile(c.q, logsOptions())
		if errcode.Code(err) != c.code {
			t.Errorf("%s: %v, want %s", c.q, err, c.code)
		}
	}
}
