package s3archive

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/ethstream/ethstream/stream"
)

// floatRow writes difficulty and total_difficulty in the physical types a
// writer other than ours may pick: FLOAT, INT64, DECIMAL(2) in INT64, plus an
// optional dictionary-encoded double with nulls; base_fee_per_gas as an
// optional INT32 with nulls, withdrawals_root as optional fixed binary.
type floatRow struct {
	Timestamp       int64     `parquet:"timestamp,timestamp(microsecond)"`
	Number          int64     `parquet:"number"`
	Hash            string    `parquet:"hash"`
	ParentHash      string    `parquet:"parent_hash"`
	Miner           string    `parquet:"miner"`
	Difficulty      float32   `parquet:"difficulty"`
	TotalDifficulty *float64  `parquet:"total_difficulty,optional,dict"`
	Size            int64     `parquet:"size,decimal(2:18)"`
	GasLimit        int64     `parquet:"gas_limit"`
	BaseFeePerGas   *int32    `parquet:"base_fee_per_gas,optional"`
	WithdrawalsRoot *[32]byte `parquet:"withdrawals_root,optional"`
}

type intDifficulty struct {
	Timestamp  int64    `parquet:"timestamp,timestamp(microsecond)"`
	Number     int64    `parquet:"number"`
	Hash       string   `parquet:"hash"`
	ParentHash string   `parquet:"parent_hash"`
	Miner      string   `parquet:"miner"`
	Difficulty int64    `parquet:"difficulty"`
	TotalDiff  [16]byte `parquet:"total_difficulty,decimal(2:38)"`
}

// TestDecodeTypes decodes the new column types from every physical layout
// above, nulls included, over several small pages and row groups, and
// checks each value against the row written.
func TestDecodeTypes(t *testing.T) {
	const n = 50
	var rows []floatRow
	var want []string
	for i := range n {
		r := floatRow{Timestamp: int64(i) * 12_000_000, Number: int64(i), Hash: hashOf(int64(i)), ParentHash: hashOf(int64(i) - 1),
			Miner: testMiners[i%len(testMiners)], Difficulty: float32(i) * 1.5, Size: int64(i+1) * 100, GasLimit: 30_000_000}
		td, fee, wr := "null", "null", "null"
		if i%3 != 0 {
			v := float64(i%4) * 1e22
			r.TotalDifficulty, td = &v, fmt.Sprint(v)
		}
		if i%5 != 0 {
			v := int32(i * 7)
			r.BaseFeePerGas, fee = &v, fmt.Sprint(v)
		}
		if i%2 == 0 {
			var h [32]byte
			h[31] = byte(i)
			r.WithdrawalsRoot, wr = &h, fmt.Sprintf("0x%064x", i)
		}
		rows = append(rows, r)
		want = append(want, fmt.Sprintf("difficulty=%v total_difficulty=%s size=%d gas_limit=30000000 base_fee_per_gas=%s withdrawals_root=%s",
			float64(float32(i)*1.5), td, i+1, fee, wr))
	}
	cols := []string{ethblock.ColDifficulty, ethblock.ColTotalDifficulty, ethblock.ColSize, ethblock.ColGasLimit, ethblock.ColBaseFeePerGas, ethblock.ColWithdrawalsRoot}
	got := decodeRows(t, rows, cols)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d:\ngot  %s\nwant %s", i, got[i], want[i])
		}
	}

	var ints []intDifficulty
	for i := range n {
		var td [16]byte
		td[15] = byte(i) // i/100 as decimal(2)
		ints = append(ints, intDifficulty{Timestamp: int64(i), Number: int64(i), Hash: hashOf(int64(i)), ParentHash: hashOf(int64(i) - 1),
			Miner: testMiners[0], Difficulty: int64(i) << 40, TotalDiff: td})
	}
	got = decodeRows(t, ints, []string{ethblock.ColDifficulty, ethblock.ColTotalDifficulty, ethblock.ColNonce})
	for i := range n {
		if w := fmt.Sprintf("difficulty=%v total_difficulty=%v nonce=null", float64(int64(i)<<40), float64(i)/100); got[i] != w {
			t.Fatalf("row %d: got %s, want %s", i, got[i], w)
		}
	}
}

// decodeRows writes rows as one Parquet file of small pages and row groups
// and decodes cols from it, one rendered row per row.
func decodeRows[T any](t *testing.T, rows []T, cols []string) []string {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, parquet.MaxRowsPerRowGroup(16), parquet.PageBufferSize(128))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := decodeFile(context.Background(), memStore{buf.Bytes()}, "mem:///f.parquet", int64(buf.Len()), blockCols(cols), &metrics{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range out.batches {
		for i := range b.Len {
			got = append(got, streamtest.Row(b, i))
		}
	}
	if len(got) != len(rows) {
		t.Fatalf("decoded %d rows of %d", len(got), len(rows))
	}
	return got
}

// TestDecodeStateReuse decodes files of every era, writer layout and
// compression one after the other with one decodeState, as a decode worker
// does, from file:// and through the embedded S3 endpoint (both read into
// the worker's buffers), and checks every file's batches against the
// oracle only after all of them were decoded: a decoded file must own its
// values, never share memory that the worker's read buffers (handed from
// file to file) or parquet-go's page pools hand to a later file.
func TestDecodeStateReuse(t *testing.T) {
	served := t.TempDir()
	root := filepath.Join(served, "lake")
	writers := [][]parquet.WriterOption{
		nil,
		{parquet.MaxRowsPerRowGroup(97), parquet.PageBufferSize(512)},
		{parquet.DataPageVersion(1), parquet.PageBufferSize(300), parquet.Compression(&parquet.Uncompressed)},
		{parquet.DefaultEncoding(&parquet.RLEDictionary), parquet.MaxRowsPerRowGroup(200)},
		{parquet.DefaultEncoding(&parquet.RLEDictionary), parquet.Compression(&parquet.Uncompressed)},
	}
	projections := [][]string{ethblock.Columns, {ethblock.ColBlockTS, ethblock.ColMiner}, {ethblock.ColHash, ethblock.ColGasUsed}}
	type file struct {
		path string
		cols []string
		want []block
	}
	var files []file
	for i, era := range eras {
		for j, w := range writers {
			k := i*len(writers) + j
			day := day0.AddDate(0, 0, k)
			bs := genBlocks(int64(1000*k), 150+37*k, day)
			p := dayPath(root, day, 0)
			writeEra(t, p, era, bs, w...)
			cols := projections[k%len(projections)]
			files = append(files, file{p, cols, project(expected(era, bs), cols)})
		}
	}
	srv, err := s3serve.Start(t.Context(), s3serve.Options{Root: served, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, via := range []string{"file", "s3"} {
		t.Run(via, func(t *testing.T) {
			m := &metrics{}
			var st store = &localStore{fs: vfs.Default, root: root, m: m}
			uri := func(p string) string { return fileURI(p) }
			if via == "s3" {
				o, err := ParseURI("s3://lake/v1.0/eth/blocks?anonymous=true&endpoint=" + srv.URL())
				if err != nil {
					t.Fatal(err)
				}
				if st, err = newS3Store(t.Context(), o, "lake", "v1.0/eth/blocks", m, func() stream.Clock { return stream.SystemClock{} }); err != nil {
					t.Fatal(err)
				}
				uri = func(p string) string {
					rel, _ := filepath.Rel(root, p)
					return s3URI("lake", filepath.ToSlash(rel))
				}
			}
			ds := newDecodeState()
			got := make([]*decodedFile, len(files))
			for i, f := range files {
				info, err := os.Stat(f.path)
				if err != nil {
					t.Fatal(err)
				}
				if got[i], err = decodeFileWith(t.Context(), st, nil, ds, uri(f.path), info.Size(), blockCols(f.cols), m); err != nil {
					t.Fatal(err)
				}
			}
			if len(ds.bufs.free) == 0 {
				t.Fatal("the decode state kept no read buffer to reuse")
			}
			for i, f := range files {
				var rows []block
				for _, b := range got[i].batches {
					rows = append(rows, batchRows(b)...)
				}
				t.Run(filepath.Base(filepath.Dir(f.path)), func(t *testing.T) { blocksEqual(t, rows, f.want) })
			}
		})
	}
}
