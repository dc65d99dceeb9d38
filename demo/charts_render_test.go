package demo

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRenderResultsCharts draws the charts of ../results as PNG and SVG into
// $ETHSTREAM_CHART_DIR, to look at them as a reader would; skipped otherwise.
func TestRenderResultsCharts(t *testing.T) {
	dir := os.Getenv("ETHSTREAM_CHART_DIR")
	if dir == "" {
		t.Skip("set ETHSTREAM_CHART_DIR to render the results' charts as PNG")
	}
	batches, err := ReadBatches(filepath.Join("..", "results", "batches.csv"))
	if err != nil {
		t.Fatal(err)
	}
	sources, err := ReadSources(filepath.Join("..", "results", "sources.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".png", ".svg"} {
		if err := writeCharts(dir, ext, batches, sources); err != nil {
			t.Fatal(err)
		}
	}
}
