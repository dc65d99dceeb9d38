package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
)

// randomOffset returns a random offset of one of the kinds sources write:
// a file source's bare log id or {"logOffset":n}, a Kafka offset, ours.
func randomOffset(r *rand.Rand) json.RawMessage {
	switch r.IntN(5) {
	case 0:
		return nil
	case 1:
		return json.RawMessage(strconv.Itoa(r.IntN(1000)))
	case 2:
		return json.RawMessage(fmt.Sprintf(`{"logOffset":%d}`, r.IntN(1000)))
	case 3:
		return json.RawMessage(fmt.Sprintf(`{"topic-%d":{"0":%d,"1":%d}}`, r.IntN(3), r.IntN(1e6), r.IntN(1e6)))
	}
	return json.RawMessage(fmt.Sprintf(`{ "block" : %d }`, r.Int64N(3e7)))
}

func randomEntry(r *rand.Rand) *OffsetEntry {
	e := &OffsetEntry{Version: OffsetsV1 + r.IntN(2), Metadata: OffsetMetadata{
		BatchWatermarkMs: r.Int64N(2e12) - 1e12, BatchTimestampMs: r.Int64N(2e12),
		Conf: map[string]string{},
	}}
	for i := r.IntN(4); i > 0; i-- {
		e.Metadata.Conf[fmt.Sprintf("spark.k%d", r.IntN(10))] = strconv.Itoa(r.IntN(300))
	}
	if r.IntN(2) == 0 {
		e.Metadata.Conf[ConfProviderClass] = []string{ProviderPebble, ProviderHDFS, ProviderRocksDB}[r.IntN(3)]
	}
	if e.Version == OffsetsV2 {
		e.Metadata.SourceMetadataInfo = map[string]SourceMetadata{}
		if r.IntN(3) == 0 {
			e.Metadata.ControlBatchInfo = &ControlBatchInfo{OperationType: OpRepartition, OperationInfo: map[string]string{"from": "200", "to": "8"}}
		}
		if r.IntN(3) == 0 {
			e.Metadata.Tombstones = map[string]Tombstone{"gone": {RemovedInBatch: r.Int64N(50), LastOffset: json.RawMessage(`{"block":1}`)}}
		}
	}
	for i := range r.IntN(4) {
		key := strconv.Itoa(i)
		if e.Version == OffsetsV2 {
			key = fmt.Sprintf("src_%d", i)
			if r.IntN(3) > 0 { // Spark may leave an active source out
				e.Metadata.SourceMetadataInfo[key] = SourceMetadata{SourceID: key, ProviderName: "p", APIVersion: "1"}
			}
		}
		e.Sources = append(e.Sources, SourceOffset{Key: key, Offset: randomOffset(r)})
	}
	return e
}

// TestRoundTripSparkRules: what our writer produces reads, under Spark's
// own parsing rules, as the same values, and its bytes are exactly what
// Spark's serializer makes of the same metadata and offsets (no final
// newline). Ours reads it back too.
func TestRoundTripSparkRules(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	for i := range 500 {
		e := randomEntry(r)
		data, err := EncodeOffsets(e)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		s, err := sparkReadOffsets(data)
		if err != nil {
			t.Fatalf("case %d: Spark's rules refuse our file: %v\n%s", i, err, data)
		}
		if s.Version != e.Version || s.Metadata == nil || s.Metadata.BatchWatermarkMs != e.Metadata.BatchWatermarkMs ||
			s.Metadata.BatchTimestampMs != e.Metadata.BatchTimestampMs || !reflect.DeepEqual(s.Metadata.Conf, e.Metadata.Conf) ||
			len(s.Offsets) != len(e.Sources) {
			t.Fatalf("case %d: Spark reads %+v %+v from\n%s", i, s, s.Metadata, data)
		}
		keys := make([]string, len(e.Sources))
		offs := make([]string, len(e.Sources))
		for j, so := range e.Sources {
			keys[j] = so.Key
			if so.Offset != nil {
				offs[j] = compactOr(string(so.Offset))
			}
			if s.Offsets[j] != offs[j] || (e.Version == OffsetsV2 && s.Keys[j] != so.Key) {
				t.Fatalf("case %d: source %d reads as %q:%q, want %q:%q", i, j, s.Keys[j], s.Offsets[j], so.Key, offs[j])
			}
		}
		meta := data[bytes.IndexByte(data, '\n')+1:]
		if k := bytes.IndexByte(meta, '\n'); k >= 0 {
			meta = meta[:k]
		}
		if want := sparkWriteOffsets(e.Version, string(meta), keys, offs); !bytes.Equal(data, want) {
			t.Fatalf("case %d: layout differs from Spark's:\n%q\n%q", i, data, want)
		}
		back, err := ParseOffsets("x", data)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if again, _ := EncodeOffsets(back); !bytes.Equal(again, data) {
			t.Fatalf("case %d: re-encoding changed the bytes:\n%q\n%q", i, again, data)
		}
	}
	for _, next := range []int64{0, 1700000005000, -1, 1 << 62} {
		data := EncodeCommit(&CommitEntry{NextBatchWatermarkMs: next})
		if !bytes.Equal(data, sparkWriteCommit(next)) {
			t.Fatalf("commit layout %q, Spark writes %q", data, sparkWriteCommit(next))
		}
		if got, err := sparkReadCommit(data); err != nil || got != next {
			t.Fatalf("Spark reads commit %q as %d, %v", data, got, err)
		}
	}
	m, _ := EncodeMetadata(Metadata{ID: "dddc5e7f-1e71-454c-8362-de184444fb5a"})
	if string(m) != `{"id":"dddc5e7f-1e71-454c-8362-de184444fb5a"}` {
		t.Fatalf("metadata %q is not Spark's layout", m)
	}
}

// agreeWithSpark fails t unless Spark's rules read data as the values our
// parser produced in e.
func agreeWithSpark(t *testing.T, data []byte, e *OffsetEntry) {
	t.Helper()
	s, err := sparkReadOffsets(data)
	if err != nil {
		t.Fatalf("we accept what Spark's rules refuse (%v):\n%q", err, data)
	}
	if s.Version != e.Version || len(s.Offsets) != len(e.Sources) {
		t.Fatalf("Spark reads version %d with %d sources, we %d with %d:\n%q", s.Version, len(s.Offsets), e.Version, len(e.Sources), data)
	}
	var want sparkMeta
	if s.Metadata != nil {
		want = *s.Metadata
	} else {
		want.Conf = map[string]string{}
	}
	if want.BatchWatermarkMs != e.Metadata.BatchWatermarkMs || want.BatchTimestampMs != e.Metadata.BatchTimestampMs || !reflect.DeepEqual(want.Conf, e.Metadata.Conf) {
		t.Fatalf("Spark reads metadata %+v, we %+v:\n%q", want, e.Metadata, data)
	}
	for j, so := range e.Sources {
		got := ""
		if so.Offset != nil {
			got = string(so.Offset)
		}
		key := strconv.Itoa(j)
		if e.Version == OffsetsV2 {
			key = s.Keys[j]
		}
		if compactOr(s.Offsets[j]) != got || key != so.Key {
			t.Fatalf("source %d: Spark reads %q:%q, we %q:%q:\n%q", j, key, s.Offsets[j], so.Key, got, data)
		}
	}
}
