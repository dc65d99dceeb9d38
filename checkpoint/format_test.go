package checkpoint

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

func sampleV2() *OffsetEntry {
	return &OffsetEntry{
		Version: OffsetsV2,
		Metadata: OffsetMetadata{
			BatchWatermarkMs: 5,
			BatchTimestampMs: 1700000000000,
			Conf: map[string]string{
				ConfShufflePartitions: "200", ConfSourceEvolution: "true", ConfProviderClass: ProviderPebble,
			},
			SourceMetadataInfo: map[string]SourceMetadata{
				"eth_live": {SourceID: "eth_live", ProviderName: "ethrpc", APIVersion: "1"},
			},
			Tombstones: map[string]Tombstone{
				"s3_backfill": {RemovedInBatch: 41, LastOffset: json.RawMessage(`{"logOffset":11}`)},
			},
		},
		Sources: []SourceOffset{{Key: "eth_live", Offset: json.RawMessage(`{"block":26087209}`)}},
	}
}

func TestOffsetsGolden(t *testing.T) {
	cases := []struct {
		name string
		e    *OffsetEntry
		want string
	}{
		{"v1", &OffsetEntry{
			Version: OffsetsV1,
			Metadata: OffsetMetadata{BatchTimestampMs: 1700000000000, Conf: map[string]string{
				ConfShufflePartitions: "200", ConfSourceEvolution: "false", ConfProviderClass: ProviderPebble}},
			Sources: []SourceOffset{{Key: "0", Offset: json.RawMessage(`{ "logOffset": 3 }`)}, {Key: "1"}},
		}, "v1\n" +
			`{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{"spark.sql.shuffle.partitions":"200","spark.sql.streaming.queryEvolution.enableSourceEvolution":"false","spark.sql.streaming.stateStore.providerClass":"pebble"}}` + "\n" +
			`{"logOffset":3}` + "\n-"},
		{"v2", sampleV2(), "v2\n" +
			`{"batchWatermarkMs":5,"batchTimestampMs":1700000000000,"conf":{"spark.sql.shuffle.partitions":"200","spark.sql.streaming.queryEvolution.enableSourceEvolution":"true","spark.sql.streaming.stateStore.providerClass":"pebble"},"sourceMetadataInfo":{"eth_live":{"sourceId":"eth_live","providerName":"ethrpc","apiVersion":"1"}},"controlBatchInfo":null,"tombstones":{"s3_backfill":{"removedInBatch":41,"lastOffset":{"logOffset":11}}}}` + "\n" +
			`eth_live:{"block":26087209}`},
		{"v2-repartition", &OffsetEntry{
			Version: OffsetsV2,
			Metadata: OffsetMetadata{Conf: map[string]string{ConfShufflePartitions: "8"},
				SourceMetadataInfo: map[string]SourceMetadata{"a": {SourceID: "a"}},
				ControlBatchInfo:   &ControlBatchInfo{OperationType: OpRepartition, OperationInfo: map[string]string{"from": "200", "to": "8"}}},
			Sources: []SourceOffset{{Key: "a"}},
		}, "v2\n" +
			`{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{"spark.sql.shuffle.partitions":"8"},"sourceMetadataInfo":{"a":{"sourceId":"a","providerName":"","apiVersion":""}},"controlBatchInfo":{"operationType":"REPARTITION","operationInfo":{"from":"200","to":"8"}}}` + "\n" +
			"a:-"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := EncodeOffsets(c.e)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("encoded:\n%s\nwant:\n%s", got, c.want)
			}
			back, err := ParseOffsets("offsets/0", got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := EncodeOffsets(back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, got) {
				t.Fatalf("round trip changed the bytes:\n%s\n%s", again, got)
			}
		})
	}
	e := sampleV2()
	back, _ := ParseOffsets("x", must(EncodeOffsets(e)))
	if !reflect.DeepEqual(back, e) {
		t.Fatalf("round trip: %+v != %+v", back, e)
	}
	if from, to, ok := must2(ParseOffsets("x", []byte(cases[2].want))).IsRepartition(); !ok || from != 200 || to != 8 {
		t.Fatalf("IsRepartition = %d %d %v", from, to, ok)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func must2(e *OffsetEntry, err error) *OffsetEntry {
	if err != nil {
		panic(err)
	}
	return e
}

func TestOffsetsCorrupt(t *testing.T) {
	good := string(must(EncodeOffsets(sampleV2())))
	meta := `{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}`
	metaV2 := `{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{},"sourceMetadataInfo":{"a":{"sourceId":"a"}},"controlBatchInfo":null}`
	cases := map[string]string{
		"empty":               "",
		"truncated mid-json":  good[:40],
		"version only":        "v1\n",
		"future version":      "v3\n" + meta + "\n",
		"version zero":        "v0\n" + meta + "\n",
		"bad version":         "version1\n" + meta + "\n",
		"signed version":      "v+1\n" + meta + "\n",
		"v2 empty metadata":   "v2\n\na:-\n",
		"bad metadata json":   "v1\n{\"batchWatermarkMs\":\n-\n",
		"metadata not object": "v1\n[1]\n-\n",
		"missing timestamp":   "v1\n{\"batchWatermarkMs\":0}\n-\n",
		"conf not strings":    "v1\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1,\"conf\":{\"a\":1}}\n",
		"bad offset":          "v1\n" + meta + "\n{\"logOffset\":\n",
		"null offset":         "v1\n" + meta + "\nnull\n",
		"v2 no colon":         "v2\n" + metaV2 + "\na\n",
		"v2 missing line":     "v2\n" + metaV2 + "\n",
		"v2 duplicate":        "v2\n" + metaV2 + "\na:-\na:-\n",
		"v2 control no type":  "v2\n" + `{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{},"sourceMetadataInfo":{},"controlBatchInfo":{}}` + "\n",
		"bad tombstone":       "v2\n" + `{"batchWatermarkMs":0,"batchTimestampMs":1,"sourceMetadataInfo":{},"tombstones":{"x":{"removedInBatch":"a"}}}` + "\n",
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseOffsets("ckpt/offsets/7", []byte(data))
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("got %v, want CHECKPOINT_CORRUPT", err)
			}
			var e *errcode.Error
			if !errorsAs(err, &e) || e.Path != "ckpt/offsets/7" {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
	// Valid odd inputs that must parse.
	for _, data := range []string{"v1\n\n-\n", "v1\n" + meta + "\n", "v1\n" + meta + "\n42\n", "v2\n" + metaV2 + "\na:{\"x\":\"a:b\"}\n",
		// Spark's layout (no final newline) and what Spark leaves out.
		good, good + "\n", "v1\n" + meta, "v1\n \n-", "v2\n" + metaV2 + "\na:-\nb:-"} {
		if _, err := ParseOffsets("x", []byte(data)); err != nil {
			t.Errorf("ParseOffsets(%q): %v", data, err)
		}
	}
}

func TestCommitFormat(t *testing.T) {
	got := EncodeCommit(&CommitEntry{NextBatchWatermarkMs: 1700000005000})
	if string(got) != "v1\n{\"nextBatchWatermarkMs\":1700000005000}" {
		t.Fatalf("commit = %q", got)
	}
	c, err := ParseCommit("c", got)
	if err != nil || c.NextBatchWatermarkMs != 1700000005000 {
		t.Fatalf("ParseCommit = %v, %v", c, err)
	}
	// What earlier ethstream versions (final newline) and Spark 2.2 ("{}",
	// no field: watermark 0) wrote.
	for data, want := range map[string]int64{"v1\n{\"nextBatchWatermarkMs\":7}\n": 7, "v1\n{}": 0, "v1\n{}\n": 0, "v1\n{\"nextBatchWatermarkMs\":-3,\"other\":1}": -3} {
		if c, err := ParseCommit("c", []byte(data)); err != nil || c.NextBatchWatermarkMs != want {
			t.Errorf("ParseCommit(%q) = %v, %v; want %d", data, c, err, want)
		}
	}
	for _, bad := range []string{"", "v1\n", "v2\n{\"nextBatchWatermarkMs\":1}\n", "v1\n{\"nextBatchWatermarkMs\":1",
		"v1\n{\"nextBatchWatermarkMs\":\"x\"}\n", "v1\n{\"nextBatchWatermarkMs\":1}\nextra\n", "x1\n{}\n",
		"v1\nnull", "v1\n[]", "v1\n{\"nextBatchWatermarkMs\":null}"} {
		if _, err := ParseCommit("ckpt/commits/3", []byte(bad)); !errcode.Is(err, errcode.CheckpointCorrupt) {
			t.Errorf("ParseCommit(%q) = %v, want CHECKPOINT_CORRUPT", bad, err)
		}
	}
}

func TestMetadataFormat(t *testing.T) {
	b, err := EncodeMetadata(Metadata{ID: "6f1c1f3e-8a4b-4c3e-9b8e-3f0e2b7d9a10"})
	if err != nil || string(b) != "{\"id\":\"6f1c1f3e-8a4b-4c3e-9b8e-3f0e2b7d9a10\"}" {
		t.Fatalf("metadata = %q %v", b, err)
	}
	for _, bad := range []string{"", "{}", "{\"id\":", "[]"} {
		if _, err := ParseMetadata("m", []byte(bad)); !errcode.Is(err, errcode.CheckpointCorrupt) {
			t.Errorf("ParseMetadata(%q) = %v", bad, err)
		}
	}
}

// FuzzParseOffsets checks that the parser never panics and that whatever it
// accepts has a canonical encoding that parses back to the same encoding.
func FuzzParseOffsets(f *testing.F) {
	f.Add(must(EncodeOffsets(sampleV2())))
	f.Add([]byte("v1\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1,\"conf\":{}}\n{\"logOffset\":3}\n-\n"))
	f.Add([]byte("v2\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":0,\"conf\":{},\"sourceMetadataInfo\":{\"a\":{}},\"controlBatchInfo\":{\"operationType\":\"REPARTITION\",\"operationInfo\":{\"from\":\"2\",\"to\":\"1\"}}}\na:-\n"))
	f.Add([]byte("v1\n\n-\n"))
	f.Add([]byte("v9\n"))
	// Spark's own files: no final newline, no conf, a Kafka offset, V2 with
	// an empty sourceMetadataInfo.
	f.Add([]byte("v1\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1489085905815}\n2"))
	f.Add([]byte("v1\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1480981499528}\n0\n{\"topic-0\":{\"0\":1}}"))
	f.Add([]byte("v1\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1533784347136,\"conf\":{\"spark.sql.shuffle.partitions\":\"5\",\"spark.sql.streaming.stateStore.providerClass\":\"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider\"}}\n0"))
	f.Add([]byte("v2\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1700000000000,\"conf\":{},\"sourceMetadataInfo\":{},\"controlBatchInfo\":null}\norders:{\"logOffset\":3}\nclicks:{\"topicA\":{\"0\":42}}"))
	f.Add([]byte("v1\r\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1}\r\n-"))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseOffsets("f", data)
		if err != nil {
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("non-corrupt error %v", err)
			}
			return
		}
		// What we accept, Spark's rules read as the same values.
		agreeWithSpark(t, data, e)
		enc, err := EncodeOffsets(e)
		if err != nil {
			t.Fatalf("accepted entry does not encode: %v\n%q", err, data)
		}
		e2, err := ParseOffsets("f", enc)
		if err != nil {
			t.Fatalf("canonical encoding does not parse: %v\n%q", err, enc)
		}
		enc2, err := EncodeOffsets(e2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%q\n%q (%v)", enc, enc2, err)
		}
	})
}

// FuzzParseCommit checks the commit parser never panics and round-trips.
func FuzzParseCommit(f *testing.F) {
	f.Add([]byte("v1\n{\"nextBatchWatermarkMs\":1700000005000}\n"))
	f.Add([]byte("v1\n{}\n"))
	f.Add([]byte("v2\n{\"nextBatchWatermarkMs\":1}\n"))
	f.Add([]byte("v1\n{\"nextBatchWatermarkMs\":233}")) // Spark's CommitLogSuite file
	f.Add([]byte("v1\n{}"))                             // Spark 2.2
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCommit("f", data)
		if err != nil {
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("non-corrupt error %v", err)
			}
			return
		}
		if next, err := sparkReadCommit(data); err != nil || next != c.NextBatchWatermarkMs {
			t.Fatalf("we read %d, Spark's rules %d (%v):\n%q", c.NextBatchWatermarkMs, next, err, data)
		}
		c2, err := ParseCommit("f", EncodeCommit(c))
		if err != nil || *c2 != *c {
			t.Fatalf("round trip %v -> %v (%v)", c, c2, err)
		}
	})
}

// FuzzParseMetadata checks the metadata parser never panics and round-trips.
func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte(`{"id":"dddc5e7f-1e71-454c-8362-de184444fb5a"}`))
	f.Add([]byte("{\"id\":\"q\"}\n"))
	f.Add([]byte(`{"id":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMetadata("f", data)
		if err != nil {
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("non-corrupt error %v", err)
			}
			return
		}
		enc, err := EncodeMetadata(m)
		if err != nil {
			t.Fatal(err)
		}
		if m2, err := ParseMetadata("f", enc); err != nil || m2 != m {
			t.Fatalf("round trip %v -> %v (%v)", m, m2, err)
		}
	})
}
