package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChartsRender(t *testing.T) {
	var batches []BatchRecord
	var sources []SourceRecord
	phase := func(id int64) string {
		switch {
		case id <= 12:
			return "backfill"
		case id <= 28:
			return "add_live"
		case id <= 36:
			return "retire_archive"
		default:
			return "shrink_state"
		}
	}
	for id := int64(0); id <= 45; id++ {
		parts := int64(200)
		if id >= 37 {
			parts = 8
		}
		batches = append(batches, BatchRecord{Phase: phase(id), BatchID: id, Kind: "data",
			NumInputRows: 20, AddBatchMs: float64(id%7 + 3), StateRowsTotal: 3000 + id, StatePartitions: parts})
		sources = append(sources, SourceRecord{Phase: phase(id), BatchID: id, SourceName: "eth_live", NumInputRows: 20})
		if id <= 28 {
			sources = append(sources, SourceRecord{Phase: phase(id), BatchID: id, SourceName: "s3_backfill", NumInputRows: 35000})
		}
	}
	dir := t.TempDir()
	if err := WriteCharts(dir, batches, sources); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"state.svg", "latency.svg", "input.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.Contains(s, "<svg") || !strings.Contains(s, "batch id") {
			t.Fatalf("%s does not look like a chart", name)
		}
	}
	if !strings.Contains(mustRead(t, filepath.Join(dir, "state.svg")), "shrink_state") {
		t.Fatal("phase marks missing from state.svg")
	}
	if os.Getenv("ETHSTREAM_KEEP_CHARTS") != "" {
		for _, n := range []string{"state.svg", "latency.svg", "input.svg"} {
			b, _ := os.ReadFile(filepath.Join(dir, n))
			os.WriteFile(filepath.Join(os.Getenv("ETHSTREAM_KEEP_CHARTS"), n), b, 0o644)
		}
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
