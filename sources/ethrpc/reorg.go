package ethrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// planAttempts bounds how often LatestOffset re-reads a chain that moved
// while it was being read (the calls of one plan are not atomic) before it
// plans no batch for this trigger.
const planAttempts = 3

// walkBackStep is the first step of the search for the common ancestor;
// each further step reads four times as many blocks.
const walkBackStep = 8

// errChainMoved: the blocks read for one plan do not form a chain; reading
// again usually settles it.
var errChainMoved = errors.New("the chain moved while it was read")

// Reorg is one reorganisation a retracting batch undid, as reported in the
// progress event (sources[].metrics.reorgs, a JSON array).
type Reorg struct {
	// Depth is the number of emitted blocks retracted.
	Depth int64 `json:"depth"`
	// Ancestor is the common ancestor's block number.
	Ancestor uint64 `json:"ancestor"`
	// OldTip is the hash of the newest block emitted before the reorg (the
	// batch's start); NewTip the hash of the batch's last block.
	OldTip string `json:"oldTip"`
	NewTip string `json:"newTip"`
	// BlocksRetracted and BlocksInserted count the batch's rows by sign.
	BlocksRetracted int64 `json:"blocksRetracted"`
	BlocksInserted  int64 `json:"blocksInserted"`
}

// keep is the number of blocks a history holds: the tip and reorgDepth
// ancestors, so the ancestor of a reorg reorgDepth deep is still in it.
func (s *Source) keep() int { return s.o.ReorgDepth + 1 }

// loadHistory returns the history ending at st. A committed offset without
// one (written before reorg=retract was turned on) gets one now: the blocks
// back to start_block, at most reorgDepth, if they still end at st, else st
// alone; only blocks the source emitted may ever be retracted.
func (s *Source) loadHistory(ctx context.Context, st Offset) (*history, error) {
	h, ok, err := s.hist.load(st)
	if err != nil || ok {
		return h, err
	}
	lo := st.Block
	if s.o.StartBlock != 0 && s.o.StartBlock <= st.Block {
		lo = max(s.o.StartBlock, st.Block-min(st.Block, uint64(s.o.ReorgDepth)))
	}
	var rows []blockRow
	if lo < st.Block {
		rows, err = s.fetchRange(ctx, numbers(lo, st.Block))
		if err != nil {
			return nil, err
		}
		if linked(rows) != nil || rows[len(rows)-1].Hash != st.Hash {
			rows = nil
		}
	}
	if rows == nil {
		// The chain changed since: walk st's own chain back by hash.
		r, err := s.fetchByHash(ctx, st.Hash)
		if err != nil {
			return nil, err
		}
		if uint64(r.Number) != st.Block {
			return nil, errcode.New(CodeBadBlock, "", "the endpoint returned a malformed block; try another endpoint",
				"block %s is number %d, the committed offset says %d", st.Hash, r.Number, st.Block)
		}
		rows = []blockRow{r}
		for n := st.Block; n > lo; n-- {
			p, err := s.fetchByHash(ctx, rows[0].ParentHash)
			if err != nil || uint64(p.Number) != n-1 {
				break
			}
			rows = append([]blockRow{p}, rows...)
		}
	}
	h = &history{blocks: rows}
	if err := s.hist.publish(st, h); err != nil {
		return nil, err
	}
	return h, nil
}

// latestRetract is LatestOffset with reorg=retract: it plans the next batch
// on the canonical chain, walking back to the common ancestor when the chain
// no longer holds the start, and publishes the history ending at the
// planned end before returning it (so a re-run finds it).
func (s *Source) latestRetract(ctx context.Context, start stream.Offset) (stream.Offset, error) {
	from := start
	if from == nil {
		from = s.env.Committed
	}
	st, haveStart, err := ParseOffset(from)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		head, _, ok, err := s.readableHead(ctx)
		if err != nil || !ok {
			return start, err
		}
		var end Offset
		var h *history
		if haveStart {
			end, h, err = s.planFrom(ctx, st, head)
		} else {
			end, h, err = s.planFirst(ctx, head)
		}
		if errors.Is(err, errChainMoved) && attempt < planAttempts {
			continue
		}
		if errors.Is(err, errChainMoved) {
			s.log.Info("ethrpc chain kept moving while planning; no batch this trigger", "attempts", attempt)
			return start, nil
		}
		if err != nil {
			return nil, err
		}
		if h == nil { // no new block
			return start, s.noteHead(ctx, head, nil)
		}
		if err := s.hist.publish(end, h); err != nil {
			return nil, err
		}
		s.noteHeadBest(ctx, head, h)
		return end.JSON(), nil
	}
}

// noteHeadBest records the readable head for ReportLatestOffset without an
// extra call when the plan read it.
func (s *Source) noteHeadBest(ctx context.Context, head uint64, h *history) {
	if l := h.last(); uint64(l.Number) == head {
		s.setReport(Offset{Block: head, Hash: l.Hash})
		return
	}
	if err := s.noteHead(ctx, head, nil); err != nil {
		s.log.Debug("ethrpc: cannot read the head for the progress report", "err", err)
	}
}

// planFirst plans the very first batch (no offset yet).
func (s *Source) planFirst(ctx context.Context, head uint64) (Offset, *history, error) {
	first := s.o.StartBlock
	if first == 0 {
		first = head
	}
	if first > head {
		return Offset{}, nil, nil
	}
	end := min(first+uint64(s.o.MaxBlocksPerTrigger)-1, head)
	lo := max(first, end-min(end, uint64(s.keep()-1)))
	rows, err := s.fetchRange(ctx, numbers(lo, end))
	if err != nil {
		return Offset{}, nil, err
	}
	if linked(rows) != nil {
		return Offset{}, nil, errChainMoved
	}
	l := rows[len(rows)-1]
	return Offset{Block: end, Hash: l.Hash}, &history{blocks: rows}, nil
}

// planFrom plans the batch after st: the next blocks when the chain still
// holds st, else a retracting batch from the common ancestor.
func (s *Source) planFrom(ctx context.Context, st Offset, head uint64) (Offset, *history, error) {
	hs, err := s.loadHistory(ctx, st)
	if err != nil {
		return Offset{}, nil, err
	}
	top := min(st.Block, head)
	nums := []uint64{top}
	var end uint64
	if head > st.Block {
		end = min(st.Block+uint64(s.o.MaxBlocksPerTrigger), head)
		nums = append(nums, numbers(max(st.Block+1, end-min(end, uint64(s.keep()-1))), end)...)
	}
	rows, err := s.fetchRange(ctx, nums)
	if err != nil {
		return Offset{}, nil, err
	}
	if top == st.Block && rows[0].Hash == st.Hash {
		next := rows[1:]
		if len(next) == 0 {
			return Offset{}, nil, nil
		}
		if linked(next) != nil || uint64(next[0].Number) == st.Block+1 && next[0].ParentHash != st.Hash {
			return Offset{}, nil, errChainMoved
		}
		l := next[len(next)-1]
		return Offset{Block: end, Hash: l.Hash}, hs.extend(next, s.keep()), nil
	}
	// The chain no longer holds st: find the newest block of the history it
	// still holds, reading back from top in growing steps (reorgs are
	// mostly shallow; a step is one batch request).
	var canon []blockRow // canonical blocks lo..top, as read so far
	fork, found := uint64(0), false
	for step, hi := uint64(walkBackStep), top; !found && hi+1 > hs.first(); step *= 4 {
		lo := max(hs.first(), hi-min(hi, step-1))
		part, err := s.fetchRange(ctx, numbers(lo, hi))
		if err != nil {
			return Offset{}, nil, err
		}
		canon = append(part, canon...)
		for i := len(part) - 1; i >= 0; i-- {
			if b, _ := hs.at(uint64(part[i].Number)); b.Hash == part[i].Hash {
				fork, found = uint64(part[i].Number), true
				break
			}
		}
		if lo == 0 {
			break
		}
		hi = lo - 1
	}
	if !found { // rows[0] is the canonical block at top
		return Offset{}, nil, s.tooDeep(ctx, st, hs, rows[0])
	}
	if above := canon[fork-uint64(canon[0].Number)+1:]; len(above) > 0 {
		anc, _ := hs.at(fork)
		if linked(above) != nil || above[0].ParentHash != anc.Hash {
			return Offset{}, nil, errChainMoved
		}
	}
	end = min(fork+uint64(s.o.MaxBlocksPerTrigger), head)
	base := hs.upTo(fork)
	if end == fork { // the chain is now no longer than the ancestor
		return Offset{Block: fork, Hash: base.last().Hash, Fork: fork, HasFork: true}, base, nil
	}
	lo := max(fork+1, end-min(end, uint64(s.keep()-1)))
	next, err := s.fetchRange(ctx, numbers(lo, end))
	if err != nil {
		return Offset{}, nil, err
	}
	if linked(next) != nil || lo == fork+1 && next[0].ParentHash != base.last().Hash {
		return Offset{}, nil, errChainMoved
	}
	l := next[len(next)-1]
	return Offset{Block: end, Hash: l.Hash, Fork: fork, HasFork: true}, base.extend(next, s.keep()), nil
}

// tooDeep builds the REORG_DETECTED error of a reorganisation deeper than the
// history: it walks the old chain back by hash against the canonical chain
// by number, at most reorgDepth more blocks, to name the depth it found.
func (s *Source) tooDeep(ctx context.Context, st Offset, hs *history, now blockRow) error {
	lo := hs.first()
	depth := fmt.Sprintf("more than %d blocks", st.Block-lo)
	if k := min(lo, uint64(s.o.ReorgDepth)); k > 0 {
		if canon, err := s.fetchRange(ctx, numbers(lo-k, lo-1)); err == nil {
			old, walked := hs.blocks[0].ParentHash, true
			for i := len(canon) - 1; i >= 0; i-- {
				if canon[i].Hash == old {
					depth = fmt.Sprintf("%d blocks, common ancestor block %d", st.Block-uint64(canon[i].Number), canon[i].Number)
					walked = false
					break
				}
				b, err := s.fetchByHash(ctx, old)
				if err != nil {
					walked = false
					break
				}
				old = b.ParentHash
			}
			if walked {
				depth = fmt.Sprintf("more than %d blocks", st.Block-(lo-k))
			}
		}
	}
	return errcode.New(CodeReorgDetected, "", remedyReorgDepth,
		"the chain was reorganised deeper than reorgDepth=%d: block %d was %s when emitted and is now %s "+
			"(depth %s); nothing from the changed chain was emitted",
		s.o.ReorgDepth, now.Number, oldHashAt(hs, st, uint64(now.Number)), now.Hash, depth)
}

func oldHashAt(hs *history, st Offset, n uint64) string {
	if b, ok := hs.at(n); ok {
		return b.Hash
	}
	return st.Hash
}

// readRetract is ReadBatch with reorg=retract: the retractions of the
// blocks above the end offset's fork (values from the start's history),
// then the blocks up to end of the chain ending at end's hash (from end's
// history, older ones fetched by number and checked to link).
func (s *Source) readRetract(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	en, ok, err := ParseOffset(end)
	if err != nil || !ok {
		return err
	}
	st, haveStart, err := ParseOffset(start)
	if err != nil {
		return err
	}
	if haveStart && string(start) == string(end) {
		return nil
	}
	he, ok, err := s.hist.load(en)
	if err != nil {
		return err
	}
	if !ok {
		return errcode.Corrupt(s.hist.path(en), nil,
			"ethrpc source history of the planned batch end %s is missing (it is written before the batch is planned; "+
				"a batch planned without reorg=retract must be run without it)", en)
	}
	var retract []blockRow
	lowest, wantParent := s.firstBlock(en), s.o.StartParentHash
	if haveStart {
		lowest, wantParent = st.Block+1, st.Hash
		if en.HasFork {
			var anc blockRow
			if retract, anc, err = s.retracted(ctx, st, en); err != nil {
				return err
			}
			lowest, wantParent = en.Fork+1, anc.Hash
		}
	}
	var insert []blockRow
	if en.Block >= lowest {
		if insert, err = s.inserted(ctx, lowest, en, he, wantParent, haveStart); err != nil {
			return err
		}
	}
	if haveStart && en.HasFork {
		s.noteReorg(Reorg{Depth: int64(st.Block - en.Fork), Ancestor: en.Fork, OldTip: st.Hash, NewTip: en.Hash,
			BlocksRetracted: int64(len(retract)), BlocksInserted: int64(len(insert))})
	}
	rows := append(retract, insert...)
	if s.isTable() {
		return s.emitTable(ctx, rows, len(retract), emit)
	}
	if err := s.complete(ctx, rows); err != nil {
		return err
	}
	return s.emitSigned(rows, len(retract), emit)
}

// retracted returns the blocks of st's history above en's fork, newest
// first, and the fork's block (the common ancestor).
func (s *Source) retracted(ctx context.Context, st, en Offset) ([]blockRow, blockRow, error) {
	hs, err := s.loadHistory(ctx, st)
	if err != nil {
		return nil, blockRow{}, err
	}
	anc, ok := hs.at(en.Fork)
	if !ok || en.Fork > st.Block {
		return nil, blockRow{}, errcode.Corrupt("", nil, "ethrpc offset %s forks at block %d, outside the history of %s (blocks %d..%d)",
			en, en.Fork, st, hs.first(), hs.last().Number)
	}
	var retract []blockRow
	for n := st.Block; n > en.Fork; n-- {
		b, _ := hs.at(n)
		retract = append(retract, b)
	}
	return retract, anc, nil
}

// inserted returns blocks lowest..en.Block of the chain ending at en and
// checks that the first links to wantParent (when known).
func (s *Source) inserted(ctx context.Context, lowest uint64, en Offset, he *history, wantParent string, haveStart bool) ([]blockRow, error) {
	insert, err := s.assemble(ctx, lowest, en, he)
	if err != nil {
		return nil, err
	}
	if r0 := insert[0]; r0.ParentHash != wantParent && wantParent != "" {
		if !haveStart {
			return nil, errcode.New(CodeSeamMismatch, "", remedySeam,
				"first block %d has parent hash %s, but start_parent_hash (block %d) is %s",
				r0.Number, r0.ParentHash, r0.Number-1, wantParent)
		}
		return nil, errcode.New(CodeReorgDetected, "", remedyReorgDepth,
			"block %d has parent hash %s, but the batch starts after %s", r0.Number, r0.ParentHash, wantParent)
	}
	return insert, nil
}

// complete gives the rows read from a version-1 history (which recorded
// only the seven columns of ethblock.Core) their other columns, when the
// projection reads any: a block's values never change under its hash, so
// eth_getBlockByHash returns exactly what was emitted, orphaned blocks
// included while the node keeps them.
func (s *Source) complete(ctx context.Context, rows []blockRow) error {
	if !needsFull(s.env.Columns) {
		return nil
	}
	for i := range rows {
		if rows[i].Full {
			continue
		}
		b, err := s.fetchByHash(ctx, rows[i].Hash)
		if err != nil {
			return err
		}
		if b.Number != rows[i].Number || b.ParentHash != rows[i].ParentHash {
			return errcode.New(CodeBadBlock, "", "the endpoint returned a malformed block; try another endpoint",
				"block %s is number %d with parent %s, the source history says %d with parent %s",
				rows[i].Hash, b.Number, b.ParentHash, rows[i].Number, rows[i].ParentHash)
		}
		core := rows[i]
		rows[i] = b
		// The seven recorded columns stay as emitted.
		rows[i].BlockTS, rows[i].Miner, rows[i].TransactionCount, rows[i].GasUsed = core.BlockTS, core.Miner, core.TransactionCount, core.GasUsed
	}
	return nil
}

// emitSigned emits rows in chunks, the first nRetract with sign -1.
func (s *Source) emitSigned(rows []blockRow, nRetract int, emit func(*stream.Batch) error) error {
	for i := 0; i < len(rows); i += emitChunkRows {
		j := min(i+emitChunkRows, len(rows))
		b := s.toBatch(rows[i:j])
		if i < nRetract {
			b.Signs = make([]int8, j-i)
			for k := range b.Signs {
				b.Signs[k] = 1
				if i+k < nRetract {
					b.Signs[k] = -1
				}
			}
		}
		if err := emit(b); err != nil {
			return err
		}
	}
	return nil
}

// assemble returns blocks lo..en.Block of the chain ending at en: the ones
// in he as recorded, older ones fetched by number and checked to link into
// he (one refetch, then REORG_DETECTED: they were replaced below the end).
func (s *Source) assemble(ctx context.Context, lo uint64, en Offset, he *history) ([]blockRow, error) {
	if lo >= he.first() {
		return he.blocks[lo-he.first():], nil
	}
	for try := 0; ; try++ {
		rows, err := s.fetchRange(ctx, numbers(lo, he.first()-1))
		if err != nil {
			return nil, err
		}
		if linked(rows) == nil && rows[len(rows)-1].Hash == he.blocks[0].ParentHash {
			return append(rows, he.blocks...), nil
		}
		if try == 1 {
			return nil, errcode.New(CodeReorgDetected, "", remedyReorgDepth,
				"blocks %d..%d of the batch ending at %s are no longer on its chain (a reorganisation more than reorgDepth=%d below its end)",
				lo, he.first()-1, en, s.o.ReorgDepth)
		}
	}
}

// noteReorg records a reorg of the current batch for Metrics.
func (s *Source) noteReorg(r Reorg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.reorgs = append(s.mu.reorgs, r)
	s.mu.reorgsTotal++
	s.mu.retractedTotal += r.BlocksRetracted
	s.mu.maxDepth = max(s.mu.maxDepth, r.Depth)
}

// resetBatchReorgs forgets the reorgs of the previous batch.
func (s *Source) resetBatchReorgs() {
	s.mu.Lock()
	s.mu.reorgs = nil
	s.mu.Unlock()
}

// reorgMetrics adds the reorg metrics to m (s.mu held).
func (s *Source) reorgMetrics(m map[string]string) {
	if s.o.Reorg != ReorgRetract {
		return
	}
	m["reorgsTotal"] = strconv.FormatInt(s.mu.reorgsTotal, 10)
	m["blocksRetractedTotal"] = strconv.FormatInt(s.mu.retractedTotal, 10)
	m["reorgDepthMax"] = strconv.FormatInt(s.mu.maxDepth, 10)
	if len(s.mu.reorgs) > 0 {
		b, _ := json.Marshal(s.mu.reorgs)
		m["reorgs"] = string(b)
	}
}

// ParseReorgs decodes sources[].metrics.reorgs of a progress event ("" is
// none).
func ParseReorgs(s string) ([]Reorg, error) {
	if s == "" {
		return nil, nil
	}
	var r []Reorg
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("parse reorgs metric: %w", err)
	}
	return r, nil
}

// fetchByHash is eth_getBlockByHash(hash, false); a block the endpoint does
// not know is REORG_DETECTED.
func (s *Source) fetchByHash(ctx context.Context, hash string) (blockRow, error) {
	var r blockRow
	err := s.pool.call(ctx, "eth_getBlockByHash "+hash, func(ctx context.Context, c *rpc.Client) error {
		var raw json.RawMessage
		if err := c.CallContext(ctx, &raw, "eth_getBlockByHash", hash, false); err != nil {
			return err
		}
		var err error
		r, err = parseBlock(raw)
		if errors.Is(err, errBlockNotFound) {
			return errcode.New(CodeReorgDetected, "", remedyReorgDepth, "the endpoint does not know block %s", hash)
		}
		if err != nil {
			return errcode.Wrap(err, CodeBadBlock, "", "the endpoint returned a malformed block; try another endpoint", "block %s", hash)
		}
		return nil
	})
	return r, err
}

// numbers is lo..hi.
func numbers(lo, hi uint64) []uint64 {
	if hi < lo {
		return nil
	}
	out := make([]uint64, 0, hi-lo+1)
	for n := lo; n <= hi; n++ {
		out = append(out, n)
	}
	return out
}

// linked checks that rows are consecutive blocks linked by parent hash.
func linked(rows []blockRow) error {
	for i := 1; i < len(rows); i++ {
		if rows[i].Number != rows[i-1].Number+1 || rows[i].ParentHash != rows[i-1].Hash {
			return errInternalBreak
		}
	}
	return nil
}
