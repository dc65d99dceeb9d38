package ethnode

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// CodeExtendPending is an `archive extend` whose --blocks differs from the
// interrupted extension it would first have to complete.
const CodeExtendPending = "ARCHIVE_EXTENSION_PENDING"

// Extended is what Extend did: the blocks it added and the archive's
// manifest after, and whether it completed an extension a crash had
// interrupted instead of starting one.
type Extended struct {
	FirstBlock uint64
	Manifest   *archivegen.Manifest
	Resumed    bool
}

// Extend appends to the archive at dir on fs the next blocks blocks of the
// chain a node started on it serves (its manifest's seed), as the dataset's
// producer publishes a node's new blocks: ExportArchive's files (and
// ExportTables' when the archive has tables), then a manifest whose last
// block, hash and header are the new last block's. The files are staged
// and committed by a journal (archivegen, CommitExtension), so that a crash
// at any point leaves the archive as before or an extension the next call
// completes: a call that finds an interrupted extension completes it,
// provided it asks for as many blocks (else CodeExtendPending, before any
// write). A node started on the original archive serves the extension's
// blocks as its first ones, with the same hashes: the extended archive
// overlaps a live source on that node on purpose (README, "A seam that
// overlaps on purpose"). A node is not started on the extended archive:
// its last block is the node's, not the chain model's, and Start refuses
// it past the model's last day.
func Extend(ctx context.Context, fs vfs.FS, dir string, blocks int) (*Extended, error) {
	if blocks < 1 {
		return nil, errcode.New(errcode.InvalidArgument, "", "pass --blocks N with N >= 1", "extend by %d blocks", blocks)
	}
	m, err := archivegen.ReadManifestFS(fs, dir)
	if err != nil {
		return nil, err
	}
	// This call owns dir: a manifest's temp file a crash left is garbage.
	if _, err := durable.RemoveTemps(fs, dir); err != nil {
		return nil, errcode.Wrap(err, archivegen.CodeOutputUnwritable, dir, "check the archive directory's permissions", "remove stale temp files")
	}
	pending, err := archivegen.PendingExtension(fs, dir)
	if err != nil {
		return nil, err
	}
	if pending != nil {
		return resume(fs, dir, m, pending, blocks)
	}
	n, err := Start(ctx, Options{Manifest: m, Seed: m.Seed, Addr: "127.0.0.1:0", Manual: true, InitialBlocks: blocks, CachedBlocks: 1})
	if err != nil {
		return nil, err
	}
	defer n.Close()
	first, last := m.LastBlock+1, m.LastBlock+uint64(blocks)
	stage := archivegen.StageRoot(dir)
	files, err := n.export(fs, stage, first, last, nil)
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
		byTable, err := n.exportTables(fs, stage, first, last, names)
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
	if err := archivegen.CommitExtension(fs, dir, &archivegen.Extension{FirstBlock: first, Manifest: &out}); err != nil {
		return nil, err
	}
	return &Extended{FirstBlock: first, Manifest: &out}, nil
}

// resume completes the interrupted extension e of the archive at dir (m its
// manifest, before or after e), if blocks is its size.
func resume(fs vfs.FS, dir string, m *archivegen.Manifest, e *archivegen.Extension, blocks int) (*Extended, error) {
	if blocks != e.Blocks() {
		return nil, errcode.New(CodeExtendPending, dir,
			fmt.Sprintf("complete it first: ethstream archive extend %s --blocks %d", dir, e.Blocks()),
			"an interrupted extension by %d blocks (%d..%d) is pending, and --blocks is %d", e.Blocks(), e.FirstBlock, e.Manifest.LastBlock, blocks)
	}
	// The journal continues this archive: its manifest is the one before
	// (ending just before the journal's first block) or already the one
	// after.
	before := m.LastBlock+1 == e.FirstBlock && m.FirstBlock == e.Manifest.FirstBlock
	after := m.LastBlock == e.Manifest.LastBlock && m.LastHash == e.Manifest.LastHash
	if !before && !after {
		return nil, errcode.New(archivegen.CodeManifestCorrupt, dir, "regenerate the archive with `ethstream gen-archive`",
			"the interrupted extension (blocks %d..%d) does not continue the archive's manifest (blocks %d..%d)",
			e.FirstBlock, e.Manifest.LastBlock, m.FirstBlock, m.LastBlock)
	}
	if err := archivegen.CompleteExtension(fs, dir, e); err != nil {
		return nil, err
	}
	return &Extended{FirstBlock: e.FirstBlock, Manifest: e.Manifest, Resumed: true}, nil
}
