package demo

import (
	"context"
	"strconv"
	"testing"
)

// TestBenchFreshnessShort runs the freshness bench end to end on a few
// blocks: every measured block has a freshness, each mined block was
// notified, and the figures are ordered.
func TestBenchFreshnessShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	res, err := BenchFreshness(context.Background(), FreshnessOptions{WorkDir: t.TempDir(), Seed: 3, Blocks: 20, Rate: 40})
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocks != 20 || res.Batches == 0 || res.Batches > 20 || res.Trigger != "real-time" {
		t.Fatalf("%d blocks in %d batches, trigger %q", res.Blocks, res.Batches, res.Trigger)
	}
	if !(0 < res.P50Ms && res.P50Ms <= res.P99Ms && res.P99Ms <= res.MaxMs) {
		t.Fatalf("freshness p50 %v p99 %v max %v", res.P50Ms, res.P99Ms, res.MaxMs)
	}
	if n, _ := strconv.Atoi(res.Notified); res.Resubscribe != "1" || n < 20 {
		t.Fatalf("subscriptions %s, notifications %s", res.Resubscribe, res.Notified)
	}
	if res.TableFiles == 0 || res.LogFiles == 0 || res.CkptFiles == 0 || res.PhaseMedianMs["triggerExecution"] <= 0 {
		t.Fatalf("files %d/%d/%d, phases %v", res.TableFiles, res.LogFiles, res.CkptFiles, res.PhaseMedianMs)
	}
}
