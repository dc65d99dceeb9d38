package s3archive

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

func blocksEqual(t *testing.T, got, want []block) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// project zeroes the fields of the columns not in cols, as collect leaves them.
func project(bs []block, cols []string) []block {
	has := map[string]bool{}
	for _, c := range cols {
		has[c] = true
	}
	out := make([]block, len(bs))
	for i, b := range bs {
		var r block
		if has[ethblock.ColNumber] {
			r.Number = b.Number
		}
		if has[ethblock.ColHash] {
			r.Hash = b.Hash
		}
		if has[ethblock.ColParentHash] {
			r.ParentHash = b.ParentHash
		}
		if has[ethblock.ColBlockTS] {
			r.TS = b.TS
		}
		if has[ethblock.ColMiner] {
			r.Miner = b.Miner
		}
		if has[ethblock.ColTransactionCount] {
			r.TxCount, r.TxNull = b.TxCount, b.TxNull
		}
		if has[ethblock.ColGasUsed] {
			r.GasUsed, r.GasNull = b.GasUsed, b.GasNull
		}
		out[i] = r
	}
	return out
}

// TestEras reads one file of every schema era, with several row groups,
// pages and projections, against the oracle rows.
func TestEras(t *testing.T) {
	projections := [][]string{
		ethblock.Columns,
		{ethblock.ColBlockTS, ethblock.ColMiner},
		{ethblock.ColGasUsed, ethblock.ColNumber},
	}
	writers := map[string][]parquet.WriterOption{
		"one-group":    nil,
		"row-groups":   {parquet.MaxRowsPerRowGroup(97), parquet.PageBufferSize(512)},
		"page-v1":      {parquet.DataPageVersion(1), parquet.PageBufferSize(300)},
		"dict-default": {parquet.DefaultEncoding(&parquet.RLEDictionary), parquet.MaxRowsPerRowGroup(200)},
	}
	for _, era := range eras {
		for wname, wopts := range writers {
			t.Run(era+"/"+wname, func(t *testing.T) {
				root := t.TempDir()
				bs := genBlocks(15_537_394, 500, day0)
				writeEra(t, dayPath(root, day0, 0), era, bs, wopts...)
				want := expected(era, bs)
				for _, cols := range projections {
					s := openSource(t, Options{URI: fileURI(filepath.Join(root, "v1.0/eth/blocks"))}, testEnv(t, vfs.NewMem(), cols...))
					end, err := s.LatestOffset(t.Context(), nil)
					if err != nil {
						t.Fatal(err)
					}
					blocksEqual(t, collect(t, s, nil, end), project(want, cols))
				}
			})
		}
	}
}

// TestBatchShape checks column order, types and chunking: one batch per row
// group, columns in projection order.
func TestBatchShape(t *testing.T) {
	root := t.TempDir()
	writeEra(t, dayPath(root, day0, 0), "nanos", genBlocks(1, 250, day0), parquet.MaxRowsPerRowGroup(100))
	cols := []string{ethblock.ColMiner, ethblock.ColBlockTS, ethblock.ColGasUsed}
	s := openSource(t, Options{URI: fileURI(root)}, testEnv(t, vfs.NewMem(), cols...))
	end, err := s.LatestOffset(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var lens []int
	err = s.ReadBatch(t.Context(), nil, end, func(b *stream.Batch) error {
		lens = append(lens, b.Len)
		var names []string
		for _, c := range b.Columns {
			names = append(names, c.Name)
			if typ, _ := ethblock.ColumnType(c.Name); typ != c.Type {
				t.Errorf("column %s has type %s, want %s", c.Name, c.Type, typ)
			}
		}
		if !reflect.DeepEqual(names, cols) {
			t.Errorf("columns %v, want %v", names, cols)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lens, []int{100, 100, 50}) {
		t.Fatalf("batch lengths %v, want one per row group", lens)
	}
}

// TestUnreadable: bad files fail the batch with ARCHIVE_FILE_UNREADABLE naming
// the object; fixing the file makes the same batch read identically;
// SkipUnreadable skips and reports instead.
func TestUnreadable(t *testing.T) {
	type missingMiner struct {
		Timestamp int64  `parquet:"timestamp,timestamp(millisecond)"`
		Number    int64  `parquet:"number"`
		Hash      string `parquet:"hash"`
	}
	cases := map[string]func(t *testing.T, path string){
		"truncated": func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data[:len(data)/2], 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"not-parquet": func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(`{"number":1,"hash":"0x01"}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"tiny": func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("PAR1"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"bad-footer-length": func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-6] = 0x7f // footer length now exceeds the file
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"missing-miner": func(t *testing.T, path string) {
			writeRows(t, path, []missingMiner{{Timestamp: 1, Number: 1, Hash: "0x01"}})
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			want := writeDays(t, root, day0, 3, 40, "modern")
			bad := dayPath(root, day0.AddDate(0, 0, 1), 0)
			good, err := os.ReadFile(bad)
			if err != nil {
				t.Fatal(err)
			}
			damage(t, bad)
			fs := vfs.NewMem()
			s := openSource(t, Options{URI: fileURI(root)}, testEnv(t, fs))
			end, err := s.LatestOffset(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tryCollect(s, nil, end)
			if !errcode.Is(err, ArchiveFileUnreadable) {
				t.Fatalf("got %v, want %s", err, ArchiveFileUnreadable)
			}
			var e *errcode.Error
			if !errorsAs(err, &e) || e.Path != fileURI(bad) {
				t.Fatalf("error does not name %s: %v", fileURI(bad), err)
			}
			// SkipUnreadable: the other two files are read, the bad one listed.
			s2 := openSource(t, Options{URI: fileURI(root), SkipUnreadable: true}, testEnv(t, fs))
			got := collect(t, s2, nil, end)
			blocksEqual(t, got, append(append([]block(nil), want[:40]...), want[80:]...))
			if m := s2.Metrics(); m["skippedFiles"] != "1" || m["skipped"] != fileURI(bad) {
				t.Fatalf("metrics %v do not list the skipped file", m)
			}
			// Fix the file: the same batch now reads everything.
			if err := os.WriteFile(bad, good, 0o644); err != nil {
				t.Fatal(err)
			}
			blocksEqual(t, collect(t, s, nil, end), want)
		})
	}
}

// TestUnreadableRoot: a missing directory is ARCHIVE_FILE_UNREADABLE at listing.
func TestUnreadableRoot(t *testing.T) {
	s := openSource(t, Options{URI: fileURI(filepath.Join(t.TempDir(), "nope"))}, testEnv(t, vfs.NewMem()))
	_, err := s.LatestOffset(t.Context(), nil)
	if !errcode.Is(err, ArchiveFileUnreadable) {
		t.Fatalf("got %v, want %s", err, ArchiveFileUnreadable)
	}
}

func TestProjectionRejectsUnknownColumn(t *testing.T) {
	s, err := New(withBlocks(Options{URI: fileURI(t.TempDir())}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context(), testEnv(t, vfs.NewMem(), stream.ColSource)); !errcode.Is(err, errcode.InvalidArgument) {
		t.Fatalf("got %v, want %s", err, errcode.InvalidArgument)
	}
}
