package orders

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethstream/ethstream/internal/duckref"
)

// TestOrdersExampleReproducible runs the example twice from scratch: every
// check passes, and both runs write byte-identical results files (and the
// same summary as the committed reference run in results/orders, for the
// default seed). With a duckref binary (internal/duckref: -duckref or
// DUCKREF, which CI sets) the table is also checked against DuckDB.
func TestOrdersExampleReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the example twice")
	}
	duck := duckref.Optional(t)
	var results [2]string
	for i := range results {
		dir := t.TempDir()
		var out bytes.Buffer
		rep, err := Run(context.Background(), Options{WorkDir: filepath.Join(dir, "work"), ResultsDir: filepath.Join(dir, "results"),
			DuckDB: duck, Out: &out})
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		if !rep.Passed() {
			t.Fatalf("run %d: a check failed:\n%s", i, out.String())
		}
		results[i] = filepath.Join(dir, "results")
		if i == 0 {
			t.Logf("%s", out.String())
		}
	}
	for _, name := range Files {
		a, err := os.ReadFile(filepath.Join(results[0], name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(results[1], name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs:\n%s\n---\n%s", name, a, b)
		}
		if name == FileSummary && duck == "" {
			continue // the reference run's summary has the DuckDB check
		}
		if ref, err := os.ReadFile(filepath.Join("..", "..", "results", "orders", name)); err == nil && !bytes.Equal(a, ref) {
			t.Errorf("%s differs from the committed results/orders/%s:\n%s\n---\n%s", name, name, a, ref)
		}
	}
}
