package checkpoint_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/internal/logtest"
)

// TestLogCodecs runs the one Log suite against the codecs of this package:
// offsets (both versions), commits and the FileStreamSource log as Spark
// writes it (checksum files beside it are ignored).
func TestLogCodecs(t *testing.T) {
	t.Run("offsets", func(t *testing.T) {
		logtest.Run(t, logtest.Case[int64, *checkpoint.OffsetEntry]{
			Codec: checkpoint.OffsetsCodec{},
			Key:   func(i int) int64 { return int64(i) },
			Value: offsetEntry,
			Stray: "notes.txt",
		})
	})
	t.Run("commits", func(t *testing.T) {
		logtest.Run(t, logtest.Case[int64, *checkpoint.CommitEntry]{
			Codec: checkpoint.CommitsCodec{},
			Key:   func(i int) int64 { return int64(i) },
			Value: func(i int) *checkpoint.CommitEntry {
				return &checkpoint.CommitEntry{NextBatchWatermarkMs: int64(i) * 1000}
			},
			Stray: "notes.txt",
		})
	})
	t.Run("file source", func(t *testing.T) {
		logtest.Run(t, logtest.Case[checkpoint.FileSourceID, []checkpoint.FileEntry]{
			Codec: checkpoint.FileSourceCodec{},
			Key:   func(i int) checkpoint.FileSourceID { return checkpoint.FileSourceID{ID: int64(i), Compact: i%3 == 2} },
			Value: fileEntries,
			Stray: ".6.crc",
		})
	})
}

// offsetEntry is a valid entry of batch i: version 1 for even i, 2 for odd.
func offsetEntry(i int) *checkpoint.OffsetEntry {
	off := json.RawMessage(`{"logOffset":` + strconv.Itoa(i) + `}`)
	e := &checkpoint.OffsetEntry{Version: checkpoint.OffsetsV1,
		Metadata: checkpoint.OffsetMetadata{BatchWatermarkMs: int64(i), BatchTimestampMs: 1700000000000 + int64(i), Conf: map[string]string{"spark.sql.shuffle.partitions": "8"}},
		Sources:  []checkpoint.SourceOffset{{Key: "0", Offset: off}, {Key: "1"}}}
	if i%2 == 1 {
		e.Version = checkpoint.OffsetsV2
		e.Metadata.SourceMetadataInfo = map[string]checkpoint.SourceMetadata{"s3_backfill": {SourceID: "s3_backfill", ProviderName: "FileStreamSource", APIVersion: "1"}}
		e.Sources = []checkpoint.SourceOffset{{Key: "s3_backfill", Offset: off}}
	}
	return e
}

// fileEntries is what file i of a file source log holds: its own entry, and
// in a compact file those of every id before it.
func fileEntries(i int) []checkpoint.FileEntry {
	e := func(n int) checkpoint.FileEntry {
		return checkpoint.FileEntry{Path: "s3://b/date=2026-01-0" + strconv.Itoa(n) + "/f.parquet", Timestamp: 100 + int64(n), BatchID: int64(n)}
	}
	if i%3 != 2 {
		return []checkpoint.FileEntry{e(i)}
	}
	var es []checkpoint.FileEntry
	for n := 0; n <= i; n++ {
		es = append(es, e(n))
	}
	return es
}

// FuzzFileSourceName: an accepted file source log name is the name of its key.
func FuzzFileSourceName(f *testing.F) {
	for _, n := range []string{"0", "9.compact", "09", ".9.crc", "-1", "1.compact.compact", "+3"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) { logtest.CheckName(t, checkpoint.FileSourceCodec{}, name) })
}

// FuzzBatchName: an accepted batch id name is the name of its id.
func FuzzBatchName(f *testing.F) {
	for _, n := range []string{"0", "10", "010", "-1", "+1", "9223372036854775808", ""} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) { logtest.CheckName(t, checkpoint.OffsetsCodec{}, name) })
}
