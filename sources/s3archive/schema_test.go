package s3archive

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// transfer is a file of another table than blocks: the source reads
// whatever schema it is configured with.
type transfer struct {
	TxHash string  `parquet:"tx_hash"`
	Value  float64 `parquet:"value"`
	Block  int64   `parquet:"block_number"`
}

// TestConfiguredSchema: a source of non-block files declares the columns
// it is configured with, reads them under their engine names, and refuses
// a file without a required column and a projection outside its schema.
func TestConfiguredSchema(t *testing.T) {
	cols := []Column{
		{Name: "hash", Type: stream.String, File: "tx_hash", Required: true},
		{Name: "value", Type: stream.Float64},
		{Name: "block", Type: stream.Int64, File: "block_number"},
		{Name: "memo", Type: stream.String, Nullable: true},
	}
	s, err := New(Options{URI: "file:///tmp/transfers", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Schema().String(); got != "hash string, value float64, block int64, memo string null" {
		t.Fatalf("schema %s", got)
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[transfer](&buf)
	if _, err := w.Write([]transfer{{"0xa", 1.5, 7}, {"0xb", 2, 8}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	out, err := decodeFile(context.Background(), memStore{data}, "mem:///f.parquet", int64(len(data)), cols, &metrics{})
	if err != nil {
		t.Fatal(err)
	}
	got := streamtest.Row(out.batches[0], 0) + "; " + streamtest.Row(out.batches[0], 1)
	if want := "hash=0xa value=1.5 block=7 memo=null; hash=0xb value=2 block=8 memo=null"; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	req := append([]Column{{Name: "fee", Type: stream.Int64, Required: true}}, cols...)
	if _, err := decodeFile(context.Background(), memStore{data}, "mem:///f.parquet", int64(len(data)), req, &metrics{}); errcode.Code(err) != ArchiveFileUnreadable || !strings.Contains(err.Error(), `"fee"`) {
		t.Fatalf("a file without a required column: %v", err)
	}
	if _, err := projectColumns(cols, []string{"hash", "miner"}); !errcode.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), "hash, value, block, memo") {
		t.Fatalf("a projection outside the schema: %v", err)
	}
	for _, bad := range [][]Column{nil, {{Name: stream.ColSource, Type: stream.String}}, {{Name: "a", Type: stream.Int64}, {Name: "A", Type: stream.Int64}}} {
		if _, err := New(Options{URI: "file:///tmp/transfers", Columns: bad}); !errcode.Is(err, errcode.InvalidArgument) {
			t.Fatalf("columns %v: %v", bad, err)
		}
	}
}

// TestCheckRefusesFilesOfAnotherSchema: Check, before a start writes
// anything, refuses an archive whose first file lacks a required column of
// the configured schema, naming the file and the schema; the same files
// pass for a source configured with their columns.
func TestCheckRefusesFilesOfAnotherSchema(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "date=2024-01-01")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "part-0.parquet")
	if err := parquet.WriteFile(file, []transfer{{"0xa", 1.5, 7}}); err != nil {
		t.Fatal(err)
	}
	blocks, err := New(Options{URI: fileURI(root), Columns: blockColumns()})
	if err != nil {
		t.Fatal(err)
	}
	err = blocks.Check(t.Context())
	if errcode.Code(err) != ArchiveFileUnreadable || !strings.Contains(err.Error(), "part-0.parquet") || !strings.Contains(err.Error(), "block_ts timestamp") {
		t.Fatalf("block source over transfer files: %v", err)
	}
	transfers, err := New(Options{URI: fileURI(root), Columns: []Column{
		{Name: "hash", Type: stream.String, File: "tx_hash", Required: true}, {Name: "value", Type: stream.Float64}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := transfers.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
}
