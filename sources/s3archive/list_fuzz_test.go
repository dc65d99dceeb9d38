package s3archive

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/ethtables"
)

// logsColumns are the logs table's columns as the archive source reads
// them (pipeline.TableArchiveColumns, without the import).
func logsColumns() []Column {
	cols, _ := ethtables.Columns(ethtables.Logs)
	out := make([]Column, len(cols))
	for i, c := range cols {
		out[i] = Column{Name: c.Name, Type: c.Type, Nullable: c.Nullable, Required: !c.Nullable}
	}
	return out
}

// logsFile is a small logs file with topics lists of 0..4 elements, in
// row groups and pages of a few rows.
func logsFile(t testing.TB, n int) []byte {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	rows := make([]ethtables.Log, n)
	for i := range rows {
		rows[i] = ethtables.Log{LogIndex: int64(i), TransactionHash: fmt.Sprintf("0x%064x", i), Address: fmt.Sprintf("0x%040x", r.IntN(5)),
			Data: "0x", BlockTimestamp: 1_700_000_000_000_000, BlockNumber: int64(i / 3), BlockHash: fmt.Sprintf("0x%064x", i/3)}
		for k := range r.IntN(5) {
			rows[i].Topics = append(rows[i].Topics, fmt.Sprintf("0x%064x", k*7+r.IntN(3)))
		}
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[ethtables.Log](&buf, parquet.MaxRowsPerRowGroup(16), parquet.PageBufferSize(256))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDecodeLogsTopics: a logs file's topics decode through the archive
// source's path (bounds check, ranged fetch, columnar) into the lists
// written.
func TestDecodeLogsTopics(t *testing.T) {
	data := logsFile(t, 40)
	out, err := decodeFile(context.Background(), memStore{data}, "mem:///logs.parquet", int64(len(data)), logsColumns(), &metrics{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := parquet.Read[ethtables.Log](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, b := range out.batches {
		c := b.Column("topics")
		for i := range b.Len {
			got := c.Elems.Strings[c.Offsets[i]:c.Offsets[i+1]]
			if fmt.Sprint(got) != fmt.Sprint(want[k].Topics) || len(got) != len(want[k].Topics) {
				t.Fatalf("row %d: topics %q, want %q", k, got, want[k].Topics)
			}
			k++
		}
	}
	if k != len(want) {
		t.Fatalf("%d rows, want %d", k, len(want))
	}
}

// FuzzDecodeLogsFile is FuzzDecodeFile over a logs file, whose topics are
// a three-level LIST (repetition levels, pages holding more values than
// rows): a damaged file decodes or is ARCHIVE_FILE_UNREADABLE, never a
// panic, and every batch it yields validates (offsets within the
// elements).
func FuzzDecodeLogsFile(f *testing.F) {
	data := logsFile(f, 60)
	f.Add(data, uint32(len(data)/2), byte(0xff))
	f.Add(data, uint32(len(data)-20), byte(1))
	f.Add(data, uint32(200), byte(0x10))
	f.Fuzz(func(t *testing.T, data []byte, at uint32, x byte) {
		decodeDamaged(t, data, at, x, "mem:///logs.parquet", logsColumns())
	})
}
