package query

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/stream"
)

// TestParseJoin: Databricks SQL's per-relation watermarks, every join type
// and the ON forms (equalities, BETWEEN and comparisons with intervals,
// whichever relation is written first).
func TestParseJoin(t *testing.T) {
	q, err := ParseJoin(`SELECT x.hash, x.block_ts AS ts, value FROM blocks WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS x
		LEFT OUTER JOIN txs WATERMARK block_ts DELAY OF INTERVAL '2 hours' y
		ON x.hash = y.block_hash AND y.block_ts BETWEEN x.block_ts AND x.block_ts + INTERVAL 10 MINUTES AND x.n == y.n`)
	if err != nil {
		t.Fatal(err)
	}
	want := JoinQuery{Type: join.LeftOuter,
		Rels:     [2]JoinRel{{Name: "blocks", Alias: "x", Watermark: "block_ts", Delay: time.Hour}, {Name: "txs", Alias: "y", Watermark: "block_ts", Delay: 2 * time.Hour}},
		LeftKeys: []string{"hash", "n"}, RightKeys: []string{"block_hash", "n"},
		Range: []join.Bound{{LeftColumn: "block_ts", Op: join.LE, RightColumn: "block_ts"},
			{LeftColumn: "block_ts", LeftOffset: 10 * time.Minute, Op: join.GE, RightColumn: "block_ts"}}}
	if q.Type != want.Type || q.Rels[0].Name != "blocks" || q.Rels[0].Alias != "x" || q.Rels[0].Delay != time.Hour || q.Rels[1].Delay != 2*time.Hour ||
		strings.Join(q.LeftKeys, ",") != "hash,n" || strings.Join(q.RightKeys, ",") != "block_hash,n" || len(q.Range) != 2 ||
		q.Range[0] != want.Range[0] || q.Range[1] != want.Range[1] {
		t.Fatalf("parsed %+v\nwant %+v", q, want)
	}
	if len(q.Items) != 3 || q.Items[0].Side != 0 || q.Items[1].As != "ts" || q.Items[2].Side != -1 {
		t.Fatalf("items %+v", q.Items)
	}
	for sql, typ := range map[string]join.Type{
		"SELECT * FROM a JOIN b ON a.k = b.k":                                                  join.Inner,
		"SELECT * FROM a INNER JOIN b ON a.k = b.k":                                            join.Inner,
		"SELECT * FROM a RIGHT JOIN b ON a.k = b.k":                                            join.RightOuter,
		"SELECT * FROM a FULL OUTER JOIN b ON a.k = b.k":                                       join.FullOuter,
		"SELECT a.* FROM a LEFT SEMI JOIN b ON b.k = a.k AND a.ts >= b.ts - INTERVAL 1 MINUTE": join.LeftSemi,
	} {
		q, err := ParseJoin(sql)
		if err != nil || q.Type != typ {
			t.Errorf("%s: %v %v", sql, q, err)
		}
	}
	q, _ = ParseJoin("SELECT a.* FROM a LEFT SEMI JOIN b ON b.k = a.k AND b.ts <= a.ts + INTERVAL 1 MINUTE")
	if b := q.Range[0]; b != (join.Bound{LeftColumn: "ts", LeftOffset: time.Minute, Op: join.GE, RightColumn: "ts"}) {
		t.Errorf("a bound written right side first: %+v", b)
	}
	for sql, msg := range map[string]string{
		"SELECT * FROM a LEFT ANTI JOIN b ON a.k = b.k":           "LEFT ANTI",
		"SELECT * FROM a JOIN b ON a.k = b.k JOIN c ON b.k = c.k": "JOIN after a stream-stream join",
		"SELECT * FROM a JOIN a ON a.k = a.k":                     "give one an alias",
		"SELECT * FROM a JOIN b ON k = b.k":                       "qualify",
		"SELECT * FROM a JOIN b ON a.k = c.k":                     "neither relation",
		"SELECT * FROM a JOIN b ON a.k + INTERVAL 1 MINUTE = b.k": "equality",
	} {
		if _, err := ParseJoin(sql); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", sql, err, msg)
		}
	}
	if !IsJoin("SELECT * FROM a JOIN b ON a.k = b.k") || IsJoin("SELECT count(*) FROM blocks") {
		t.Error("IsJoin")
	}
}

// TestJoinOuterQuery: WHERE, GROUP BY, HAVING and a SELECT list of
// expressions make a query over the join's rows, written with the join's
// column names (a name both relations have is alias_name) and read FROM
// the name given; a plain SELECT list keeps the join's own.
func TestJoinOuterQuery(t *testing.T) {
	var schemas [2]stream.Schema
	for side, cols := range [2][]string{{"hash", "miner", "block_ts"}, {"block_hash", "fee", "block_ts"}} {
		for _, c := range cols {
			schemas[side].Fields = append(schemas[side].Fields, stream.Field{Name: c, Type: stream.String})
		}
	}
	for sql, want := range map[string]string{
		"SELECT x.miner, window(x.block_ts, '1 hour') AS w, count(*) AS n, sum(y.fee) FROM blocks WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS x " +
			"JOIN txs WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS y ON x.hash = y.block_hash AND y.block_ts BETWEEN x.block_ts AND x.block_ts + INTERVAL 1 MINUTE " +
			"WHERE y.fee > 0 GROUP BY x.miner, window(x.block_ts, '1 hour') HAVING count(*) > 1;": "SELECT miner, window(x_block_ts, '1 hour') AS w, count(*) AS n, sum(fee) FROM joined WHERE fee > 0 GROUP BY miner, window(x_block_ts, '1 hour') HAVING count(*) > 1",
		"SELECT x.*, y.fee FROM a AS x JOIN b AS y ON x.hash = y.block_hash WHERE `y`.`fee` > 0":                                        "SELECT hash, miner, x_block_ts, fee FROM joined WHERE fee > 0",
		"SELECT y.block_ts, x.block_ts AS t, count(*) FROM a AS x JOIN b AS y ON x.hash = y.block_hash GROUP BY y.block_ts, x.block_ts": "SELECT y_block_ts, x_block_ts AS t, count(*) FROM joined GROUP BY y_block_ts, x_block_ts",
		"SELECT DISTINCT x.miner FROM a AS x JOIN b AS y ON x.hash = y.block_hash":                                                      "SELECT DISTINCT miner FROM joined",
	} {
		q, err := ParseJoin(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		got, _, err := q.OuterQuery("joined", schemas)
		if !q.Outer() || err != nil || got != want {
			t.Errorf("%s:\n got %q (%v)\nwant %q", sql, got, err, want)
		}
	}
	q, err := ParseJoin("SELECT y.block_ts, x.block_ts AS t, count(*) FROM a AS x JOIN b AS y ON x.hash = y.block_hash GROUP BY 1, 2")
	if err != nil {
		t.Fatal(err)
	}
	if _, renames, err := q.OuterQuery("joined", schemas); err != nil || fmt.Sprint(renames) != "map[y_block_ts:block_ts]" {
		t.Errorf("renames %v %v", renames, err)
	}
	q, err = ParseJoin("SELECT x.hash, y.fee AS f FROM a AS x JOIN b AS y ON x.hash = y.block_hash")
	if err != nil || q.Outer() || len(q.Items) != 2 {
		t.Errorf("a SELECT list of columns is the join's own: %+v %v", q, err)
	}
	q, _ = ParseJoin("SELECT x.nope FROM a AS x JOIN b AS y ON x.hash = y.block_hash WHERE y.fee > 0")
	if _, _, err := q.OuterQuery("joined", schemas); err == nil || !strings.Contains(err.Error(), CodeUnresolvedColumn) {
		t.Errorf("an unknown column: %v", err)
	}
}

// TestEventTimes: of a join's event times the query over its rows runs with
// the one its window (or session window) reads, the first without a
// window, none when its window reads neither.
func TestEventTimes(t *testing.T) {
	rows := stream.Schema{Fields: []stream.Field{{Name: "x_ts", Type: stream.Timestamp}, {Name: "y_ts", Type: stream.Timestamp},
		{Name: "other_ts", Type: stream.Timestamp}, {Name: "miner", Type: stream.String}}}
	o := Options{Sources: []string{"joined"}, Schemas: []stream.Schema{rows}, Relations: []Relation{{Name: "joined", Sources: []int{0}}},
		OutputMode: "append", EventTimes: []EventTime{{"x_ts", time.Hour}, {"y_ts", 2 * time.Hour}}}
	for sql, want := range map[string]string{
		"SELECT window(y_ts, '10 minutes'), count(*) FROM joined GROUP BY window(y_ts, '10 minutes')":                             "y_ts 2h0m0s",
		"SELECT window(x_ts, '10 minutes'), count(*) FROM joined GROUP BY window(x_ts, '10 minutes')":                             "x_ts 1h0m0s",
		"SELECT session_window(y_ts, '5 minutes'), miner, count(*) FROM joined GROUP BY session_window(y_ts, '5 minutes'), miner": "y_ts 2h0m0s",
		"SELECT miner, x_ts FROM joined WHERE miner <> ''":                                                                        "x_ts 1h0m0s",
	} {
		c, err := Compile(sql, o)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if got := fmt.Sprintf("%s %v", c.WatermarkColumn, c.WatermarkDelay); got != want {
			t.Errorf("%s: watermark %s, want %s", sql, got, want)
		}
	}
	// A window over neither event time runs without a watermark, which
	// append mode refuses for an aggregation.
	o.OutputMode = "update"
	c, err := Compile("SELECT window(other_ts, '10 minutes'), count(*) FROM joined GROUP BY window(other_ts, '10 minutes')", o)
	if err != nil || c.WatermarkColumn != "" {
		t.Errorf("a window over another column: watermark %q, %v", c.WatermarkColumn, err)
	}
}

// TestParseJoinUnion: a relation may union several sources as Spark SQL
// writes a union in FROM, with the WATERMARK clause and an alias after it;
// anything else in the parentheses, a union without an alias or a source
// in both relations is refused.
func TestParseJoinUnion(t *testing.T) {
	q, err := ParseJoin("SELECT x.hash, y.value FROM (SELECT * FROM a1 UNION ALL SELECT * FROM a2) WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS x " +
		"JOIN (SELECT * FROM b1) y ON x.hash = y.hash")
	if err != nil {
		t.Fatal(err)
	}
	if l, r := q.Rels[0], q.Rels[1]; strings.Join(l.Sources, ",") != "a1,a2" || l.Name != "" || l.Alias != "x" || l.Watermark != "block_ts" || l.Delay != time.Hour ||
		strings.Join(r.Sources, ",") != "b1" || r.Alias != "y" {
		t.Fatalf("relations %+v", q.Rels)
	}
	if q, err := ParseJoin("SELECT * FROM a AS x JOIN b ON x.k = b.k"); err != nil || strings.Join(q.Rels[0].Sources, ",") != "a" || q.Rels[0].Name != "a" {
		t.Fatalf("a relation of one source: %+v %v", q, err)
	}
	for sql, msg := range map[string]string{
		"SELECT * FROM (SELECT * FROM a1 UNION ALL SELECT * FROM a2) JOIN b ON a1.k = b.k":                     "without an alias",
		"SELECT * FROM (SELECT * FROM a1 UNION SELECT * FROM a2) x JOIN b ON x.k = b.k":                        "UNION without ALL",
		"SELECT * FROM (SELECT k FROM a1) x JOIN b ON x.k = b.k":                                               "SELECT * FROM source",
		"SELECT * FROM (SELECT * FROM a1 WHERE k > 0) x JOIN b ON x.k = b.k":                                   "SELECT * FROM source",
		"SELECT * FROM (SELECT * FROM a1 UNION ALL SELECT * FROM a1) x JOIN b ON x.k = b.k":                    "unioned twice",
		"SELECT * FROM ((SELECT * FROM a1) UNION ALL (SELECT * FROM a2)) x JOIN b ON x.k = b.k":                "parenthesized query",
		"SELECT * FROM (SELECT * FROM a1 UNION ALL (SELECT * FROM a2)) x JOIN b ON x.k = b.k":                  "parenthesized query",
		"SELECT * FROM (SELECT * FROM a1 UNION ALL SELECT * FROM b) x JOIN b ON x.k = b.k":                     "both relations",
		"SELECT * FROM (SELECT * FROM a1 UNION ALL SELECT * FROM a2) x JOIN (SELECT * FROM a2) y ON x.k = y.k": "both relations",
	} {
		// Each is valid Spark SQL (Spark runs a self-union, a self-join and
		// an unaliased subquery): UNSUPPORTED_SQL, not a syntax error.
		if _, err := ParseJoin(sql); err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), CodeUnsupported) {
			t.Errorf("%s: %v, want %q (%s)", sql, err, msg, CodeUnsupported)
		}
	}
	// Aliases resolve case-insensitively (side), so x and X would both
	// name the left relation.
	if _, err := ParseJoin("SELECT * FROM a AS x JOIN b AS X ON x.k = X.k"); err == nil || !strings.Contains(err.Error(), "both relations of the join are called") {
		t.Errorf("aliases x and X: %v", err)
	}
	if !IsJoin("SELECT * FROM (SELECT * FROM a1 UNION ALL SELECT * FROM a2) x JOIN b ON x.k = b.k") {
		t.Error("IsJoin of a union relation")
	}
}
