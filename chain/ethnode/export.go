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
		f, err := n.exportDay(out, date, blocks[:k])
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		blocks = blocks[k:]
	}
	return files, nil
}

func blockDate(h *types.Header) time.Time {
	return time.Unix(int64(h.Time), 0).UTC().Truncate(24 * time.Hour)
}

// exportDay writes blocks, all of one date, as one archive file.
func (n *Node) exportDay(out string, date time.Time, blocks []*nodeBlock) (archivegen.ManifestFile, error) {
	db := &chain.Day{}
	for _, b := range blocks {
		db.Headers = append(db.Headers, types.CopyHeader(b.header))
		db.Hashes = append(db.Hashes, b.hash)
		db.TxCount = append(db.TxCount, int64(b.txCount))
		db.Size = append(db.Size, int64(b.size))
		db.TD = append(db.TD, n.td)
	}
	lo, hi := blocks[0].header.Number.Uint64(), blocks[len(blocks)-1].header.Number.Uint64()
	ds := date.Format(time.DateOnly)
	key := path.Join(archivegen.BlocksPrefix, "date="+ds, fmt.Sprintf("part-00000-node-%d-%d-c000.snappy.parquet", lo, hi))
	dst := filepath.Join(out, filepath.FromSlash(key))
	if err := durable.EnsureDir(vfs.Default, filepath.Dir(dst)); err != nil {
		return archivegen.ManifestFile{}, errcode.Wrap(err, archivegen.CodeOutputUnwritable, dst, "check --out", "create archive directory")
	}
	size, err := archivegen.EncodeDay(db, dst)
	if err == nil {
		err = durable.SyncDir(vfs.Default, filepath.Dir(dst))
	}
	if err != nil {
		return archivegen.ManifestFile{}, errcode.Wrap(err, archivegen.CodeOutputUnwritable, dst, "check free space and permissions of --out", "write archive file")
	}
	return archivegen.ManifestFile{Key: key, Date: ds, Rows: int64(len(blocks)), Bytes: size, FirstBlock: lo, LastBlock: hi}, nil
}
