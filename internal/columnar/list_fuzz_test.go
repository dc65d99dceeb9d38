package columnar

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// FuzzDecodeList feeds arbitrary bytes, seeded with files of every list
// shape, to the list decoder behind the bounds every reader runs first
// (FooterOffset, CheckBounds): it returns an error or lists whose offsets
// and validity check (never a panic, never a batch that fails Validate).
// Dropped when the bounds were the archive source's alone, since a claimed
// page size reached parquet-go's allocation unchecked; restored over them.
func FuzzDecodeList(f *testing.F) {
	t := &testing.T{}
	for _, c := range listShapes {
		r := rand.New(rand.NewPCG(3, 4))
		f.Add(writeLists(t, c, randomLists(r, 40, c), 64), c.str)
	}
	f.Fuzz(func(t *testing.T, data []byte, str bool) {
		elem := stream.Int64
		if str {
			elem = stream.String
		}
		r := bytes.NewReader(data)
		footer, err := FooterOffset(r, int64(len(data)))
		if err != nil {
			return
		}
		pf, err := parquet.OpenFile(r, int64(len(data)))
		if err != nil {
			return
		}
		dec, err := Open(pf, []Field{{Name: "id", Type: stream.Int64}, {Name: "l", Type: stream.ArrayOf(elem)}}, nil)
		if err != nil {
			return
		}
		var leaves []int
		for _, c := range dec.Columns() {
			leaves = append(leaves, c.Leaf)
		}
		if CheckBounds(pf.Metadata(), r, int64(len(data)), footer, leaves) != nil {
			return
		}
		_, _, _ = decodeLists(data, elem) // it panics on a batch that fails Validate
	})
}
