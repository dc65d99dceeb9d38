package ethrpc

import (
	"fmt"

	"github.com/ethstream/ethstream/errcode"
)

// An overlapping seam (option overlap=K) starts the live source K blocks
// before start_block, on purpose: blocks start_block-K .. start_block-1,
// which the archive holds too, are read again. start_block and
// start_parent_hash keep naming the seam (the archive's last block + 1 and
// that block's hash), and the seam check moves with the read: the batch
// that holds block start_block checks that its parent hash is
// start_parent_hash (SEAM_MISMATCH otherwise), whichever batch that is.
//
// The source cannot know what the query does with the blocks it reads
// twice: pipeline refuses a query reading an overlapping source without a
// deduplication by block (Overlap), so the overlap is never counted twice
// silently.

// seam is the check an overlapping source makes: block number block must
// have parent hash parent. The zero value checks nothing.
type seam struct {
	block  uint64
	parent string
}

// setOverlap validates the overlap option and moves the first block read
// K blocks back, keeping the seam to check in s.seam.
func (s *Source) setOverlap() error {
	k := s.o.Overlap
	if k == 0 {
		return nil
	}
	if s.o.StartBlock <= k || s.o.StartParentHash == "" {
		return errcode.New(CodeInvalidOption, "", "give start_block (the archive's last block + 1, more than overlap) and start_parent_hash (the archive's last hash) with overlap",
			"overlap=%d needs start_block > %d and start_parent_hash: the seam it reads across", k, k)
	}
	s.seam = seam{block: s.o.StartBlock, parent: s.o.StartParentHash}
	s.o.StartBlock -= k
	s.o.StartParentHash = ""
	return nil
}

// Overlap is the number of blocks before start_block the source reads
// again (option overlap; 0 without).
func (s *Source) Overlap() uint64 { return s.o.Overlap }

// checkSeam checks the seam block, when rows hold it.
func (s *Source) checkSeam(rows []blockRow) error {
	if s.seam.block == 0 || len(rows) == 0 {
		return nil
	}
	lo, hi, at := rows[0].Number, rows[len(rows)-1].Number, int64(s.seam.block)
	if at < lo || at > hi {
		return nil
	}
	r := rows[at-lo]
	if r.Number != at {
		panic(fmt.Sprintf("ethrpc: rows %d..%d are not consecutive: row %d is block %d", lo, hi, at-lo, r.Number))
	}
	if r.ParentHash != s.seam.parent {
		return errcode.New(CodeSeamMismatch, "", remedySeam,
			"block %d (start_block, read after an overlap of %d) has parent hash %s, but start_parent_hash (block %d) is %s",
			r.Number, s.o.Overlap, r.ParentHash, r.Number-1, s.seam.parent)
	}
	return nil
}
