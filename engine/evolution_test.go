package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
)

func entryV(v int, parts string, evo bool, srcs ...string) *checkpoint.OffsetEntry {
	e := &checkpoint.OffsetEntry{Version: v, Metadata: checkpoint.OffsetMetadata{Conf: map[string]string{
		checkpoint.ConfShufflePartitions: parts, checkpoint.ConfSourceEvolution: map[bool]string{true: "true", false: "false"}[evo],
		checkpoint.ConfProviderClass: checkpoint.ProviderPebble}}}
	if v == 2 {
		e.Metadata.SourceMetadataInfo = map[string]checkpoint.SourceMetadata{}
	}
	for i, s := range srcs {
		k, off, _ := strings.Cut(s, "=")
		if v == 1 {
			k = string(rune('0' + i))
		} else {
			e.Metadata.SourceMetadataInfo[k] = checkpoint.SourceMetadata{SourceID: k}
		}
		var raw json.RawMessage
		if off != "" {
			raw = json.RawMessage(off)
		}
		e.Sources = append(e.Sources, checkpoint.SourceOffset{Key: k, Offset: raw})
	}
	return e
}

// TestPlanStartEdges covers planner decisions the scenarios reach only
// through damaged or unusual logs.
func TestPlanStartEdges(t *testing.T) {
	evo := settings{evolution: true}
	// C < L-1: a warning, then batch L re-runs from L-1's offsets.
	snap := &checkpoint.Snapshot{Path: "/c", HasMetadata: true, Metadata: checkpoint.Metadata{ID: "q"},
		LatestID: 5, Latest: entryV(2, "8", true, `a={"n":5}`), Prev: entryV(2, "8", true, `a={"n":4}`),
		CommittedID: 3, Committed: &checkpoint.CommitEntry{NextBatchWatermarkMs: 7}}
	p, err := planStart(snap, []string{"a"}, evo)
	if err != nil || p.PendingID != 5 || string(p.PendingStart["a"]) != `{"n":4}` || len(p.Warnings) != 1 || p.Watermark != 7 {
		t.Fatalf("C < L-1: %+v %v", p, err)
	}
	// Pending L > 0 without offsets/L-1: corrupt, never a guess.
	snap.Prev = nil
	if _, err := planStart(snap, []string{"a"}, evo); !errcode.Is(err, errcode.CheckpointCorrupt) {
		t.Fatalf("missing L-1: %v", err)
	}
	// V1 repartition detection: the partition count differs from L-1's.
	v1 := &checkpoint.Snapshot{Path: "/c", HasMetadata: true, LatestID: 3, Latest: entryV(1, "8", false, `a={"n":1}`),
		Prev: entryV(1, "200", false, `a={"n":1}`), CommittedID: 2, Committed: &checkpoint.CommitEntry{}}
	p, err = planStart(v1, []string{""}, settings{})
	if err != nil || p.PendingRepartitionTo != 8 || p.Partitions != 200 {
		t.Fatalf("V1 repartition: %+v %v", p, err)
	}
	if _, err := planStart(v1, []string{""}, settings{stateParts: 16}); !errcode.Is(err, errcode.UnresumableRepartition) {
		t.Fatalf("V1 repartition, other target: %v", err)
	}
	// A new checkpoint: stateStore.partitions wins over shuffle.partitions.
	p, err = planStart(&checkpoint.Snapshot{Path: "/c", LatestID: -1, CommittedID: -1}, []string{"a"}, settings{evolution: true, shuffle: 200, stateParts: 8})
	if err != nil || p.Partitions != 8 || p.Version != 2 || p.Conf[checkpoint.ConfShufflePartitions] != "8" || p.RepartitionTo != 0 {
		t.Fatalf("new: %+v %v", p, err)
	}
	// Removal computes the tombstone's last offset; re-adding is refused.
	all := &checkpoint.Snapshot{Path: "/c", HasMetadata: true, LatestID: 2, Latest: entryV(2, "8", true, `a={"n":1}`, `b={"n":9}`),
		CommittedID: 2, Committed: &checkpoint.CommitEntry{}}
	p, err = planStart(all, []string{"a"}, evo)
	if err != nil || string(p.NewTombstones["b"].LastOffset) != `{"n":9}` {
		t.Fatalf("remove: %+v %v", p, err)
	}
	all.Latest.Metadata.Tombstones = map[string]checkpoint.Tombstone{"z": {RemovedInBatch: 1}}
	if _, err := planStart(all, []string{"a", "z"}, evo); !errcode.Is(err, errcode.TombstoneNameReuse) || !strings.Contains(err.Error(), "/c") {
		t.Fatalf("reuse: %v", err)
	}
	// A malformed pinned partition count is corruption.
	all.Latest.Metadata.Conf[checkpoint.ConfShufflePartitions] = "x"
	if _, err := planStart(all, []string{"a"}, evo); !errcode.Is(err, errcode.CheckpointCorrupt) {
		t.Fatalf("bad partitions: %v", err)
	}
}

func TestParseSettings(t *testing.T) {
	for _, kv := range [][2]string{
		{checkpoint.ConfSourceEvolution, "yes"}, {checkpoint.ConfOffsetLogVersion, "3"}, {checkpoint.ConfShufflePartitions, "0"},
		{checkpoint.ConfStatePartitions, "-1"}, {checkpoint.ConfMinBatchesToRetain, "x"}, {checkpoint.ConfNoDataBatches, "2"},
		{checkpoint.ConfProviderClass, "rocksdb"},
	} {
		if _, err := parseSettings(map[string]string{kv[0]: kv[1]}); !errcode.Is(err, errcode.InvalidArgument) {
			t.Errorf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
	s, err := parseSettings(nil)
	if err != nil || s.minRetain != 100 || !s.noDataBatches || s.evolution {
		t.Fatalf("defaults: %+v %v", s, err)
	}
}
