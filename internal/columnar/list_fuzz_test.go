package columnar

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// FuzzDecodeList feeds arbitrary bytes, seeded with files of every list
// shape, to the list decoder behind the bounds every reader runs first
// (FooterOffset, CheckBounds): it returns an error or lists whose offsets
// and validity check (never a batch that fails Validate). Dropped when the
// bounds were the archive source's alone, since a claimed page size
// reached parquet-go's allocation unchecked; restored over them. A panic
// of parquet-go itself on a damaged page (it panics, for instance, on an
// INT64 column annotated as a 32-bit int) is what every reader recovers
// into the batch's error (pqcol, the archive source), so the harness
// recovers it too; a batch that fails Validate is the decoder's bug.
func FuzzDecodeList(f *testing.F) {
	t := &testing.T{}
	for _, c := range listShapes {
		r := rand.New(rand.NewPCG(3, 4))
		f.Add(writeLists(t, c, randomLists(r, 40, c), 64), c.str)
	}
	f.Fuzz(func(t *testing.T, data []byte, str bool) {
		defer func() {
			if r := recover(); r != nil {
				if s, ok := r.(string); ok && strings.HasPrefix(s, "decoded an invalid batch") {
					t.Fatal(s)
				}
			}
		}()
		elem := stream.Int64
		if str {
			elem = stream.String
		}
		r := bytes.NewReader(data)
		footer, err := FooterOffset(r, int64(len(data)))
		if err != nil {
			return
		}
		pf, err := parquet.OpenFile(r, int64(len(data)), readerOptions...)
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

// readerOptions are the options every reader of the repository opens a
// file with (pqcol, the archive source, the Delta writer's reader): no
// page index or bloom filter is read, so none is allocated at the size
// the footer claims.
var readerOptions = []parquet.FileOption{parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true)}

// TestCheckPageV2Levels: a v2 data page whose nulls outnumber its values,
// or whose level lengths exceed the page, is refused by the bounds (both
// reached a parquet-go panic in FuzzDecodeList: a negative values count,
// a levels slice past the page).
func TestCheckPageV2Levels(t *testing.T) {
	for _, c := range []struct {
		h    format.DataPageHeaderV2
		want string
	}{
		{format.DataPageHeaderV2{NumValues: 4, NumRows: 4, NumNulls: 5}, "5 nulls among 4 values"},
		{format.DataPageHeaderV2{NumValues: 4, NumRows: 4, DefinitionLevelsByteLength: 90, RepetitionLevelsByteLength: 20}, "levels of 20 + 90 bytes in a 100-byte page"},
		{format.DataPageHeaderV2{NumValues: 4, NumRows: 4, DefinitionLevelsByteLength: -1}, "levels of"},
	} {
		h := format.PageHeader{UncompressedPageSize: 100, CompressedPageSize: 100, DataPageHeaderV2: thrift.New(c.h)}
		if err := CheckPage(&h, 1000, 16); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.h, err, c.want)
		}
	}
	ok := format.PageHeader{UncompressedPageSize: 100, CompressedPageSize: 100,
		DataPageHeaderV2: thrift.New(format.DataPageHeaderV2{NumValues: 4, NumRows: 4, NumNulls: 1, DefinitionLevelsByteLength: 2})}
	if err := CheckPage(&ok, 1000, 16); err != nil {
		t.Errorf("a sound v2 page: %v", err)
	}
}
