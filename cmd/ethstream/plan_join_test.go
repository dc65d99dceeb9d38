package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanJoinPushdown: plan shows where a WHERE over a stream-stream join
// runs: a left outer join whose WHERE rejects the right side's nulls runs
// as an inner one, each side's conjuncts below it.
func TestPlanJoinPushdown(t *testing.T) {
	dir := t.TempDir()
	src := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return name + "=parquet:file://" + filepath.ToSlash(p) + "?schema=" + url.QueryEscape("k STRING, ts TIMESTAMP, id BIGINT")
	}
	q := "SELECT a.k, a.id, b.id AS bid FROM l WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS a " +
		"LEFT OUTER JOIN r WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS b ON a.k = b.k AND a.ts BETWEEN b.ts AND b.ts + INTERVAL 1 MINUTE "
	for where, want := range map[string]string{
		"WHERE a.id > 5 AND b.id % 2 = 0 AND a.id < b.id": "join (operator 0) runs as Inner; WHERE below it, per side: a: (id > 5) AND b: ((id % 2) = 0)\n",
		"WHERE a.id > 5 AND b.id IS NULL":                 "join (operator 0) runs as LeftOuter; WHERE below it, per side: a: (id > 5)\n",
	} {
		code, out, errOut := cli(t, context.Background(), "plan", "--checkpoint", filepath.Join(dir, "ck"), "--table", filepath.Join(dir, "tb"),
			"--source", src("l"), "--source", src("r"), "--output-mode", "append",
			"--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true", "--query", q+where)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d\n%s%s\nwant the line %q", where, code, out, errOut, want)
		}
	}
}
