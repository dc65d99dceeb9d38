package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanShowsSinkRules: plan shows the sinks' restart rules with Spark's
// rule beside ethstream's: a file sink's new output directory, and a
// change from the file sink to a Delta table, are refused with
// SINK_LOCATION_CHANGED before anything is written.
func TestPlanShowsSinkRules(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	in := filepath.Join(root, "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := range 5 {
		lines = append(lines, fmt.Sprintf(`{"order_id":"o%d","amount":%d.5}`, i, i))
	}
	if err := os.WriteFile(filepath.Join(in, "part-0.json"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(root, "ck")
	src := "orders=json:file://" + filepath.ToSlash(in) + "?schema=" + url.QueryEscape("order_id STRING, amount DOUBLE")
	args := func(cmd string, sink ...string) []string {
		return append([]string{cmd, "--checkpoint", ck, "--source", src, "--query", "SELECT order_id, amount FROM orders", "--output-mode", "append",
			"--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true"}, sink...)
	}
	exec := func(want int, a ...string) string {
		t.Helper()
		resetFlags(rootCmd)
		var out, errOut bytes.Buffer
		if code := execute(ctx, a, &out, &errOut); (code == 0) != (want == 0) {
			t.Fatalf("%v: exit %d: %s%s", a, code, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	exec(0, append(args("run", "--sink", "parquet:"+filepath.Join(root, "out")), "--trigger", "available-now")...)
	for _, tc := range []struct {
		sink []string
		want []string
	}{
		{[]string{"--sink", "parquet:" + filepath.Join(root, "out2")},
			[]string{"sink location: parquet:" + filepath.Join(root, "out") + " -> parquet:" + filepath.Join(root, "out2"), "REFUSED SINK_LOCATION_CHANGED", "Spark: not allowed", "output directory changed"}},
		{[]string{"--table", filepath.Join(root, "table")},
			[]string{"sink format: parquet:", "REFUSED SINK_LOCATION_CHANGED", "Spark: changes between a few specific combinations of sinks are allowed"}},
	} {
		out := exec(1, args("plan", tc.sink...)...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("plan %v lacks %q:\n%s", tc.sink, w, out)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "out2")); !os.IsNotExist(err) {
		t.Fatalf("plan created the new output directory: %v", err)
	}
}
