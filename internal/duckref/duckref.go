// Package duckref runs scripts/duckref, DuckDB in a Go module of its own
// (the main module never links DuckDB), for the tests that compare
// ethstream's answers with DuckDB's batch answer over the same files.
//
// The binary is named by the test flag -duckref or the environment
// variable DUCKREF; .ci/run builds it and sets DUCKREF. Without it a test
// that needs DuckDB is skipped, and fails under CI (environment CI=true),
// so that CI never passes without having asked DuckDB: the rule of
// internal/fixture.Missing.
//
// This is test support: only tests import it (it registers -duckref).
package duckref

import (
	"encoding/csv"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/internal/fixture"
)

// Build is how to build the binary, for the messages of a test without it.
const Build = "cd scripts/duckref && go build -o /tmp/duckref . (then -duckref /tmp/duckref or DUCKREF=/tmp/duckref)"

var path = flag.String("duckref", os.Getenv("DUCKREF"), "scripts/duckref's binary ("+Build+"); the DuckDB comparisons skip without it, and fail with CI=true")

// Binary returns the duckref binary's path; without one the test is
// skipped, or fails when the environment has CI=true.
func Binary(t testing.TB) string {
	t.Helper()
	if *path == "" {
		fixture.Missing(t, "needs scripts/duckref's binary: %s", Build)
	}
	return *path
}

// Optional returns the binary's path for a test whose DuckDB comparison is
// its last part: "" (logged) without one, and a failure under CI=true.
func Optional(t testing.TB) string {
	t.Helper()
	if *path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: the DuckDB comparison needs scripts/duckref's binary: %s", Build)
		}
		t.Logf("DuckDB comparison skipped: needs scripts/duckref's binary: %s", Build)
	}
	return *path
}

// Table runs `duckref table GLOB QUERY` (query over the Parquet files
// glob as the view t) and returns DuckDB's CSV records, the header first.
func Table(t testing.TB, bin, glob, query string) [][]string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, "table", glob, query)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckref table %s: %v: %s\n%s", glob, err, strings.TrimSpace(stderr.String()), query)
	}
	recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(recs) < 1 {
		t.Fatalf("duckref answered %q: %v\n%s", out, err, query)
	}
	return recs
}

// Lines is Table's rows, the header left out, each as its comma-joined
// fields (a null is an empty field), sorted.
func Lines(t testing.TB, bin, glob, query string) []string {
	t.Helper()
	recs := Table(t, bin, glob, query)
	rows := make([]string, 0, len(recs)-1)
	for _, r := range recs[1:] {
		rows = append(rows, strings.Join(r, ","))
	}
	slices.Sort(rows)
	return rows
}
