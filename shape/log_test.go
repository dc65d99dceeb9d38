package shape

import (
	"strconv"
	"testing"

	"github.com/ethstream/ethstream/internal/logtest"
)

// TestLogCodec runs the one checkpoint.Log suite against shape/: strict
// (any other name under shape/ is CHECKPOINT_CORRUPT), keyed by seq.
func TestLogCodec(t *testing.T) {
	logtest.Run(t, logtest.Case[int64, Record]{
		Codec:  Codec{},
		Strict: true,
		Key:    func(i int) int64 { return int64(i) },
		Value: func(i int) Record {
			s := sample()
			s.Filter = "(gas_used > " + strconv.Itoa(i) + ")"
			return Record{Seq: int64(i), Path: logtest.Dir + "/" + strconv.Itoa(i), FirstBatchID: int64(i) * 10, Shape: s.normal()}
		},
		Stray: "junk",
	})
}
