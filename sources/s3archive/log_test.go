package s3archive

import (
	"strconv"
	"testing"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/internal/logtest"
)

// TestLogCodec runs the one checkpoint.Log suite against this source's log:
// Spark's FileStreamSource format, strict (scan refuses stray names), and
// every file holding an entry of its own id.
func TestLogCodec(t *testing.T) {
	logtest.Run(t, logtest.Case[checkpoint.FileSourceID, []logEntry]{
		Codec:  sourceLogCodec{},
		Strict: true,
		Key: func(i int) checkpoint.FileSourceID {
			return checkpoint.FileSourceID{ID: int64(i), Compact: isCompactID(int64(i), 3)}
		},
		Value: func(i int) []logEntry {
			var es []logEntry
			for n := 0; n <= i; n++ {
				if n == i || isCompactID(int64(i), 3) {
					es = append(es, logEntry{Path: "s3://b/date=2026-01-0" + strconv.Itoa(n) + "/f.parquet", Timestamp: int64(n), BatchID: int64(n)})
				}
			}
			return es
		},
		Stray: "x",
	})
}
