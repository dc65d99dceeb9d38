package ethnode

import (
	"context"
	"maps"
	"slices"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/errcode"
)

// Extend appends to the archive at dir (m its manifest) the next blocks
// blocks of the chain a node started on it serves (seed m.Seed), as the
// dataset's producer publishes a node's new blocks: ExportArchive's
// files (and ExportTables' when the archive has tables), then a manifest
// whose last block, hash and header are the new last block's, written
// last (archivegen.WriteManifest), so that an interrupted extension leaves
// the old manifest. A node started on the original archive serves the
// extension's blocks as its first ones, with the same hashes: the
// extended archive overlaps a live source on that node on purpose
// (README, "A seam that overlaps on purpose"). A node is not started on
// the extended archive: its last block is the node's, not the chain
// model's, and Start refuses it past the model's last day.
func Extend(ctx context.Context, dir string, m *archivegen.Manifest, blocks int) (*archivegen.Manifest, error) {
	if blocks < 1 {
		return nil, errcode.New(errcode.InvalidArgument, "", "pass --blocks N with N >= 1", "extend by %d blocks", blocks)
	}
	n, err := Start(ctx, Options{Manifest: m, Seed: m.Seed, Addr: "127.0.0.1:0", Manual: true, InitialBlocks: blocks, CachedBlocks: 1})
	if err != nil {
		return nil, err
	}
	defer n.Close()
	first, last := m.LastBlock+1, m.LastBlock+uint64(blocks)
	files, err := n.ExportArchive(dir, first, last)
	if err != nil {
		return nil, err
	}
	out := *m
	out.Files = append(slices.Clone(m.Files), files...)
	dates := map[string]bool{}
	for _, f := range m.Files {
		dates[f.Date] = true
	}
	for _, f := range files {
		out.Rows += f.Rows
		out.Bytes += f.Bytes
		if !dates[f.Date] {
			dates[f.Date] = true
			out.Days++
		}
	}
	if len(m.Tables) > 0 {
		names := slices.Sorted(maps.Keys(m.Tables))
		byTable, err := n.ExportTables(dir, first, last, names)
		if err != nil {
			return nil, err
		}
		out.Tables = map[string]archivegen.ManifestTable{}
		for _, t := range names {
			mt := m.Tables[t]
			mt.Files = append(slices.Clone(mt.Files), byTable[t]...)
			for _, f := range byTable[t] {
				mt.Rows += f.Rows
				mt.Bytes += f.Bytes
			}
			out.Tables[t] = mt
		}
	}
	h := n.Header(last)
	out.LastBlock, out.LastHash, out.LastTimestamp, out.LastHeader = last, h.Hash().Hex(), int64(h.Time), types.CopyHeader(h)
	if err := archivegen.WriteManifest(dir, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
