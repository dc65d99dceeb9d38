package ethnode

import (
	"fmt"
	"path"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// ExportArchive writes the node's canonical blocks first..last (blocks it
// has mined) under out in the archive's layout and schema (package archivegen, Archive
// layout): one file per date partition, named
// part-00000-node-<first>-<last>-c000.snappy.parquet, published through
// durable (Replace: an export repeated writes the same bytes). This is
// how the dataset's producer turns a node's blocks into daily files, and
// it lets a test read one block from the archive and from the node: both
// render the same header through the same row (basicRow, renderBlock).
func (n *Node) ExportArchive(out string, first, last uint64) ([]archivegen.ManifestFile, error) {
	return n.export(vfs.Default, out, first, last, nil)
}

// ExportTables writes the tables (archivegen.Tables but blocks) of the
// node's canonical blocks first..last under out, as ExportArchive writes
// blocks: one file per date partition and table,
// v1.0/eth/<table>/date=.../part-00000-node-<first>-<last>-c000.snappy.parquet,
// the rows of each block's body through archivegen.EncodeTables, the
// archive writer's own. It returns each table's files.
func (n *Node) ExportTables(out string, first, last uint64, tables []string) (map[string][]archivegen.ManifestFile, error) {
	return n.exportTables(vfs.Default, out, first, last, tables)
}

// exportTables is ExportTables on fs.
func (n *Node) exportTables(fs vfs.FS, out string, first, last uint64, tables []string) (map[string][]archivegen.ManifestFile, error) {
	byTable := map[string][]archivegen.ManifestFile{}
	_, err := n.export(fs, out, first, last, func(date time.Time, blocks []*nodeBlock, db *chain.Day) error {
		lo, hi := blocks[0].header.Number.Uint64(), blocks[len(blocks)-1].header.Number.Uint64()
		ds := date.Format(time.DateOnly)
		dsts := make([]string, len(tables))
		keys := make([]string, len(tables))
		for k, t := range tables {
			keys[k] = path.Join(archivegen.TablePrefix(t), "date="+ds, fmt.Sprintf("part-00000-node-%d-%d-c000.snappy.parquet", lo, hi))
			dsts[k] = filepath.Join(out, filepath.FromSlash(keys[k]))
			if err := durable.EnsureDir(fs, filepath.Dir(dsts[k])); err != nil {
				return errcode.Wrap(err, archivegen.CodeOutputUnwritable, dsts[k], "check --out", "create archive directory")
			}
		}
		rows, sizes, err := archivegen.EncodeTables(fs, tables, db, func(i int) *chain.Body { return n.body(blocks[i]) }, dsts)
		for k := range tables {
			if err == nil {
				err = durable.SyncDir(fs, filepath.Dir(dsts[k]))
			}
		}
		if err != nil {
			return errcode.Wrap(err, archivegen.CodeOutputUnwritable, out, "check free space and permissions of --out", "write archive file")
		}
		for k, t := range tables {
			byTable[t] = append(byTable[t], archivegen.ManifestFile{Key: keys[k], Date: ds, Rows: rows[k], Bytes: sizes[k], FirstBlock: lo, LastBlock: hi})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return byTable, nil
}

// export groups the canonical blocks first..last by date and writes each
// date's blocks file on fs, or with tables set calls it instead.
func (n *Node) export(fs vfs.FS, out string, first, last uint64, tables func(date time.Time, blocks []*nodeBlock, db *chain.Day) error) ([]archivegen.ManifestFile, error) {
	n.mu.RLock()
	var blocks []*nodeBlock
	for num := first; num <= last && first <= last; num++ {
		b := n.blockLocked(num)
		if b == nil {
			n.mu.RUnlock()
			return nil, errcode.New(errcode.InvalidArgument, "", "export blocks the node has mined",
				"block %d is not mined by the node (it mines %d..%d)", num, n.base, n.base+uint64(len(n.canon))-1)
		}
		blocks = append(blocks, b)
	}
	n.mu.RUnlock()
	var files []archivegen.ManifestFile
	for len(blocks) > 0 {
		date := blockDate(blocks[0].header)
		k := 1
		for k < len(blocks) && blockDate(blocks[k].header).Equal(date) {
			k++
		}
		if tables != nil {
			if err := tables(date, blocks[:k], n.day(blocks[:k])); err != nil {
				return nil, err
			}
		} else {
			f, err := n.exportDay(fs, out, date, blocks[:k])
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		blocks = blocks[k:]
	}
	return files, nil
}

// day is blocks as the archive writer's Day.
func (n *Node) day(blocks []*nodeBlock) *chain.Day {
	db := &chain.Day{}
	for _, b := range blocks {
		db.Headers = append(db.Headers, types.CopyHeader(b.header))
		db.Hashes = append(db.Hashes, b.hash)
		db.TxCount = append(db.TxCount, int64(b.txCount))
		db.Size = append(db.Size, int64(b.size))
		db.TD = append(db.TD, n.td)
	}
	return db
}

func blockDate(h *types.Header) time.Time {
	return time.Unix(int64(h.Time), 0).UTC().Truncate(24 * time.Hour)
}

// exportDay writes blocks, all of one date, as one archive file.
func (n *Node) exportDay(fs vfs.FS, out string, date time.Time, blocks []*nodeBlock) (archivegen.ManifestFile, error) {
	db := n.day(blocks)
	lo, hi := blocks[0].header.Number.Uint64(), blocks[len(blocks)-1].header.Number.Uint64()
	ds := date.Format(time.DateOnly)
	key := path.Join(archivegen.BlocksPrefix, "date="+ds, fmt.Sprintf("part-00000-node-%d-%d-c000.snappy.parquet", lo, hi))
	dst := filepath.Join(out, filepath.FromSlash(key))
	if err := durable.EnsureDir(fs, filepath.Dir(dst)); err != nil {
		return archivegen.ManifestFile{}, errcode.Wrap(err, archivegen.CodeOutputUnwritable, dst, "check --out", "create archive directory")
	}
	size, err := archivegen.EncodeDay(fs, db, dst)
	if err == nil {
		err = durable.SyncDir(fs, filepath.Dir(dst))
	}
	if err != nil {
		return archivegen.ManifestFile{}, errcode.Wrap(err, archivegen.CodeOutputUnwritable, dst, "check free space and permissions of --out", "write archive file")
	}
	return archivegen.ManifestFile{Key: key, Date: ds, Rows: int64(len(blocks)), Bytes: size, FirstBlock: lo, LastBlock: hi}, nil
}
