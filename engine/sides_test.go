package engine

import (
	"testing"
	"time"

	"github.com/ethstream/ethstream/checkpoint"
)

// TestSidedWatermark: Spark's WatermarkTracker over a join's sides: each
// side's max event time minus its delay, 0 for a side with no row yet, the
// policy's choice (min by default, or max), never below the batch's.
func TestSidedWatermark(t *testing.T) {
	sides := []Side{{Watermark: &Watermark{Column: "ts", Delay: time.Second}}, {Watermark: &Watermark{Column: "ts", Delay: 2 * time.Second}}}
	ev := func(maxMs int64) eventStats { return eventStats{n: 1, min: maxMs * 1000, max: maxMs * 1000} }
	for _, tc := range []struct {
		name     string
		batchWM  int64
		ev       []eventStats
		marks    []sideMark
		policy   string
		want     int64
		wantMark []sideMark
	}{
		{"one side read, min", 0, []eventStats{ev(10_000), {}}, nil, policyMin, 0, []sideMark{{9_000, true}, {0, true}}},
		{"one side read, max", 0, []eventStats{ev(10_000), {}}, nil, policyMax, 9_000, []sideMark{{9_000, true}, {0, true}}},
		{"both read, min", 0, []eventStats{ev(10_000), ev(10_000)}, nil, policyMin, 8_000, []sideMark{{9_000, true}, {8_000, true}}},
		{"a side's mark never moves back", 0, []eventStats{ev(5_000), ev(10_000)}, []sideMark{{9_000, true}, {1_000, true}}, policyMin, 8_000,
			[]sideMark{{9_000, true}, {8_000, true}}},
		{"never below the batch's", 8_500, []eventStats{{}, ev(9_000)}, []sideMark{{9_000, true}, {0, true}}, policyMin, 8_500,
			[]sideMark{{9_000, true}, {7_000, true}}},
	} {
		got, marks := nextSidedWatermark(tc.batchWM, sides, tc.ev, tc.marks, tc.policy)
		if got != tc.want || len(marks) != 2 || marks[0] != tc.wantMark[0] || marks[1] != tc.wantMark[1] {
			t.Errorf("%s: %d %v, want %d %v", tc.name, got, marks, tc.want, tc.wantMark)
		}
	}
	// A side without a watermark takes no part.
	one := []Side{{}, {Watermark: &Watermark{Column: "ts"}}}
	if got, _ := nextSidedWatermark(0, one, []eventStats{{}, ev(4_000)}, nil, policyMin); got != 4_000 {
		t.Errorf("one watermark: %d, want 4000", got)
	}
}

// TestWatermarkPolicyPinned: a query with several watermarks records the
// policy in the offsets conf (the session's, else min) and a restart takes
// the checkpoint's, min for an entry that records none; a query with one
// watermark records nothing.
func TestWatermarkPolicyPinned(t *testing.T) {
	k := checkpoint.ConfMultipleWatermarkPolicy
	sp := &startPlan{New: true, Conf: map[string]string{}}
	pinWatermarkPolicy(sp, settings{watermarkPolicy: policyMax}, true)
	if sp.Conf[k] != "max" {
		t.Fatalf("new checkpoint: %v", sp.Conf)
	}
	sp = &startPlan{New: true, Conf: map[string]string{}}
	pinWatermarkPolicy(sp, settings{}, false)
	if _, ok := sp.Conf[k]; ok {
		t.Fatalf("one watermark records the policy: %v", sp.Conf)
	}
	last := &checkpoint.OffsetEntry{}
	sp = &startPlan{Last: last, Conf: map[string]string{k: "max"}}
	pinWatermarkPolicy(sp, settings{watermarkPolicy: policyMin}, true)
	if sp.Conf[k] != "max" || len(sp.Warnings) != 1 || watermarkPolicy(sp.Conf) != policyMax {
		t.Fatalf("restart: %v %v", sp.Conf, sp.Warnings)
	}
	sp = &startPlan{Last: last, Conf: map[string]string{}}
	pinWatermarkPolicy(sp, settings{watermarkPolicy: policyMax}, true)
	if sp.Conf[k] != "min" || len(sp.Warnings) != 1 {
		t.Fatalf("restart of a checkpoint without the key: %v %v", sp.Conf, sp.Warnings)
	}
	if _, err := parseSettings(map[string]string{k: "avg"}); err == nil {
		t.Fatal("policy avg accepted")
	}
	if s, err := parseSettings(map[string]string{k: "MAX"}); err != nil || s.watermarkPolicy != policyMax {
		t.Fatalf("policy MAX: %v %v", s.watermarkPolicy, err)
	}
}
