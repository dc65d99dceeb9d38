package ethrpc

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// signedRow is one emitted row with its sign.
type signedRow struct {
	row  blockRow
	sign int8
}

// collect decodes emitted batches into signed rows, checking that
// retractions come before insertions.
func collect(t testing.TB, out *[]signedRow) func(*stream.Batch) error {
	return func(b *stream.Batch) error {
		if err := b.Validate(); err != nil {
			return err
		}
		for i := 0; i < b.Len; i++ {
			r := batchRow(b, i)
			sr := signedRow{row: r, sign: b.Sign(i)}
			if n := len(*out); n > 0 && (*out)[n-1].sign > 0 && sr.sign < 0 {
				return fmt.Errorf("retraction of block %d after an insertion", r.Number)
			}
			*out = append(*out, sr)
		}
		return nil
	}
}

// batchRow decodes row i of b: every column b has, Full when b has every
// block column.
func batchRow(b *stream.Batch, i int) blockRow {
	var r blockRow
	for _, c := range b.Columns {
		null := c.IsNull(i)
		switch c.Type {
		case stream.String:
			v := c.Strings[i]
			switch c.Name {
			case ethblock.ColHash:
				r.Hash = v
			case ethblock.ColParentHash:
				r.ParentHash = v
			case ethblock.ColMiner:
				r.Miner = v
			case ethblock.ColNonce:
				r.Nonce = v
			case ethblock.ColSha3Uncles:
				r.Sha3Uncles = v
			case ethblock.ColLogsBloom:
				r.LogsBloom = v
			case ethblock.ColTransactionsRoot:
				r.TransactionsRoot = v
			case ethblock.ColStateRoot:
				r.StateRoot = v
			case ethblock.ColReceiptsRoot:
				r.ReceiptsRoot = v
			case ethblock.ColExtraData:
				r.ExtraData = v
			case ethblock.ColWithdrawalsRoot:
				r.WithdrawalsRoot, r.HasWithdrawalsRoot = v, !null
			}
		case stream.Float64:
			v := c.Float64s[i]
			switch c.Name {
			case ethblock.ColDifficulty:
				r.Difficulty = v
			case ethblock.ColTotalDifficulty:
				r.TotalDifficulty, r.HasTotalDifficulty = v, !null
			}
		default:
			v := c.Int64s[i]
			switch c.Name {
			case ethblock.ColNumber:
				r.Number = v
			case ethblock.ColBlockTS:
				r.BlockTS = v
			case ethblock.ColTransactionCount:
				r.TransactionCount = v
			case ethblock.ColGasUsed:
				r.GasUsed = v
			case ethblock.ColSize:
				r.Size = v
			case ethblock.ColGasLimit:
				r.GasLimit = v
			case ethblock.ColBaseFeePerGas:
				r.BaseFeePerGas, r.HasBaseFee = v, !null
			}
		}
	}
	r.Full = len(b.Columns) >= len(ethblock.Columns)
	return r
}

// sameRow compares two rows in every column both hold: all of them when
// both are Full, else the seven of ethblock.Core.
func sameRow(a, b blockRow) bool {
	if a.Full && b.Full {
		return a == b
	}
	return coreRow(a) == coreRow(b)
}

func coreRow(r blockRow) blockRow {
	return blockRow{Number: r.Number, Hash: r.Hash, ParentHash: r.ParentHash, BlockTS: r.BlockTS, Miner: r.Miner,
		TransactionCount: r.TransactionCount, GasUsed: r.GasUsed}
}

// retractDriver plays the engine around a reorg=retract source: the
// committed offset, a planned batch that may be pending across a crash, the
// source's metadata directory, and the table of live rows the batches
// produce (retractions remove identical rows).
type retractDriver struct {
	t         *testing.T
	node      *ethnode.Node
	o         Options
	fs        vfs.FS
	dir       string
	src       *Source
	committed stream.Offset
	pending   stream.Offset      // planned (offsets written) but not committed
	firstRun  []signedRow        // rows of the pending batch's first complete read, if any
	table     map[int64]blockRow // live rows by number
	reorgs    int
	retracted int
}

func newRetractDriver(t *testing.T, n *ethnode.Node, o Options) *retractDriver {
	d := &retractDriver{t: t, node: n, o: o, fs: vfs.Default, dir: t.TempDir(), table: map[int64]blockRow{}}
	d.open()
	return d
}

func (d *retractDriver) open() {
	d.t.Helper()
	if d.src != nil {
		_ = d.src.Close()
	}
	s, err := New(d.o)
	if err != nil {
		d.t.Fatal(err)
	}
	env := stream.SourceEnv{Name: "eth_live", MetadataDir: d.dir, FS: d.fs, Columns: ethblock.Columns,
		Committed: d.committed, Clock: newFakeClock(), Logger: slog.New(slog.DiscardHandler)}
	if err := s.Open(context.Background(), env); err != nil {
		d.t.Fatal(err)
	}
	d.src = s
	d.t.Cleanup(func() { _ = s.Close() })
}

// crash points of one batch.
const (
	crashNone         = iota
	crashAfterPlan    // history published, offsets not written: the batch is planned again
	crashAfterOffsets // offsets written, nothing read: the batch is re-run
	crashMidRead      // the read failed half way
	crashBeforeCommit // rows read, the sink did not commit: re-run
	crashAfterCommit  // committed, Source.Commit (pruning) not called
	numCrashPoints
)

// step runs one trigger; false when no batch was planned.
func (d *retractDriver) step(crash int) bool {
	d.t.Helper()
	ctx := context.Background()
	end := d.pending
	if end == nil {
		var err error
		end, err = d.src.LatestOffset(ctx, d.committed)
		if err != nil {
			d.t.Fatalf("LatestOffset after %s: %v", d.committed, err)
		}
		if string(end) == string(d.committed) {
			return false
		}
		if crash == crashAfterPlan {
			d.open()
			return true
		}
		d.pending = end
		if crash == crashAfterOffsets {
			d.open()
			return true
		}
	}
	var got []signedRow
	if crash == crashMidRead {
		n := 0
		_ = d.src.ReadBatch(ctx, d.committed, end, func(b *stream.Batch) error {
			if n++; n > 0 {
				return fmt.Errorf("injected failure")
			}
			return nil
		})
		d.open()
		return true
	}
	if err := d.src.ReadBatch(ctx, d.committed, end, collect(d.t, &got)); err != nil {
		d.t.Fatalf("ReadBatch(%s, %s): %v", d.committed, end, err)
	}
	if d.firstRun != nil && fmt.Sprint(d.firstRun) != fmt.Sprint(got) {
		d.t.Fatalf("re-run of batch (%s, %s] read other rows:\n%v\nfirst run:\n%v", d.committed, end, got, d.firstRun)
	}
	if crash == crashBeforeCommit {
		d.firstRun = got
		d.open()
		return true
	}
	// The sink commits: apply the rows.
	for _, r := range got {
		if r.sign < 0 {
			old, ok := d.table[r.row.Number]
			if !ok || !sameRow(old, r.row) {
				d.t.Fatalf("retraction of block %d %+v, table holds %+v (present %v)", r.row.Number, r.row, old, ok)
			}
			delete(d.table, r.row.Number)
			d.retracted++
			continue
		}
		if old, ok := d.table[r.row.Number]; ok {
			d.t.Fatalf("block %d inserted twice: %+v over %+v", r.row.Number, r.row, old)
		}
		d.table[r.row.Number] = r.row
	}
	if m := d.src.Metrics(); m["reorgs"] != "" {
		rs, err := ParseReorgs(m["reorgs"])
		if err != nil || len(rs) != 1 || rs[0].BlocksRetracted == 0 {
			d.t.Fatalf("reorgs metric %q: %v", m["reorgs"], err)
		}
		d.reorgs++
	}
	d.committed, d.pending, d.firstRun = end, nil, nil
	if crash == crashAfterCommit {
		d.open()
		return true
	}
	if err := d.src.Commit(ctx, end); err != nil {
		d.t.Fatal(err)
	}
	d.checkChain()
	return true
}

// checkChain: the live rows are one chain, from the first block to the
// committed end, ending at its hash, each row as the node serves that hash.
func (d *retractDriver) checkChain() {
	d.t.Helper()
	en := mustOffset(d.t, d.committed)
	nums := make([]int64, 0, len(d.table))
	for n := range d.table {
		nums = append(nums, n)
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	if len(nums) == 0 || uint64(nums[len(nums)-1]) != en.Block || d.table[nums[len(nums)-1]].Hash != en.Hash {
		d.t.Fatalf("table ends at %v, committed %s", nums[len(nums)-1:], en)
	}
	for i, n := range nums {
		r := d.table[n]
		if i > 0 && (n != nums[i-1]+1 || r.ParentHash != d.table[nums[i-1]].Hash) {
			d.t.Fatalf("table is not one chain at block %d", n)
		}
	}
	// Spot-check values against the node, by hash (orphaned blocks included).
	for _, n := range []int64{nums[0], nums[len(nums)/2], nums[len(nums)-1]} {
		b, err := d.src.fetchByHash(context.Background(), d.table[n].Hash)
		if err != nil || !sameRow(b, d.table[n]) || !b.Full {
			d.t.Fatalf("block %d: table %+v, node %+v (%v)", n, d.table[n], b, err)
		}
	}
}

// checkCanonical: after catching up with no reorg pending, the table is the
// node's canonical chain.
func (d *retractDriver) checkCanonical(first uint64) {
	d.t.Helper()
	head := d.node.Head()
	if len(d.table) != int(head-first+1) {
		d.t.Fatalf("table holds %d blocks, canonical chain %d..%d", len(d.table), first, head)
	}
	for n := first; n <= head; n++ {
		h := d.node.Header(n)
		if r := d.table[int64(n)]; r.Hash != strings.ToLower(h.Hash().Hex()) {
			d.t.Fatalf("block %d: table %s, canonical %s", n, r.Hash, h.Hash().Hex())
		}
	}
}

// TestRetractRandomReorgs: random schedules of blocks and reorgs (depth 1 to
// reorgDepth, several between two triggers, inside one batch's range and
// across batch boundaries, while the query is down), with a crash at every
// step of batches; after every batch the rows are exactly one chain, each
// retraction took back a row as it was emitted, and after catching up the
// table is the canonical chain.
func TestRetractRandomReorgs(t *testing.T) {
	m := testManifest(t)
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			n := startChainNode(t, 10, ethnode.Faults{})
			const depth = 6
			d := newRetractDriver(t, n, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1,
				MaxBlocksPerTrigger: 2 + rng.IntN(8), Reorg: ReorgRetract, ReorgDepth: depth})
			crashes := map[int]int{}
			for iter := 0; iter < 100; iter++ {
				switch x := rng.IntN(10); {
				case x < 4:
					n.Mine(1 + rng.IntN(6))
				case x < 7:
					n.Reorg(1 + rng.IntN(depth))
					if rng.IntN(2) == 0 {
						n.Mine(rng.IntN(3))
					}
				}
				for k := rng.IntN(3); k > 0; k-- {
					c := crashNone
					if rng.IntN(3) == 0 {
						c = 1 + rng.IntN(numCrashPoints-1)
					}
					if d.step(c) {
						crashes[c]++
					}
				}
			}
			for d.step(crashNone) || d.pending != nil {
			}
			d.checkCanonical(m.LastBlock + 1)
			if d.reorgs == 0 || d.retracted == 0 {
				t.Fatalf("no reorg was retracted (%d reorgs): the test lost its point", d.reorgs)
			}
			t.Logf("%d reorgs retracted %d blocks; crashes %v", d.reorgs, d.retracted, crashes)
			for c := crashAfterPlan; c < numCrashPoints; c++ {
				if crashes[c] == 0 {
					t.Logf("crash point %d not exercised", c)
				}
			}
			// Only the committed end's history is left.
			names, _ := d.fs.List(d.dir)
			if len(names) != 1 || names[0] != historyName(mustOffset(t, d.committed)) {
				t.Fatalf("history files %v", names)
			}
		})
	}
}

// TestRetractDeepReorg: a reorg deeper than reorgDepth is REORG_DETECTED,
// naming both hashes and the depth found, before anything is emitted.
func TestRetractDeepReorg(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 30, ethnode.Faults{})
	d := newRetractDriver(t, n, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1,
		MaxBlocksPerTrigger: 50, Reorg: ReorgRetract, ReorgDepth: 4})
	d.step(crashNone)
	tip := mustOffset(t, d.committed)
	n.Reorg(7)
	_, err := d.src.LatestOffset(context.Background(), d.committed)
	if !errcode.Is(err, CodeReorgDetected) || !strings.Contains(err.Error(), "depth 7 blocks, common ancestor block") ||
		!strings.Contains(err.Error(), strings.ToLower(n.Header(tip.Block).Hash().Hex())) || !strings.Contains(err.Error(), tip.Hash) {
		t.Fatalf("err %v", err)
	}
	// A depth within reorgDepth still retracts.
	n2 := startChainNode(t, 30, ethnode.Faults{})
	d2 := newRetractDriver(t, n2, Options{Endpoints: []string{n2.URL()}, StartBlock: m.LastBlock + 1,
		MaxBlocksPerTrigger: 50, Reorg: ReorgRetract, ReorgDepth: 4})
	d2.step(crashNone)
	n2.Reorg(4)
	if !d2.step(crashNone) || d2.retracted != 4 {
		t.Fatalf("retracted %d", d2.retracted)
	}
	d2.checkCanonical(m.LastBlock + 1)
}

// TestRetractDefaultModeUnchanged: without reorg=retract the same reorg is
// REORG_DETECTED and no history is written.
func TestRetractDefaultModeUnchanged(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 10, ethnode.Faults{})
	o := Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1, MaxBlocksPerTrigger: 50}
	s, _ := openSource(t, o, nil)
	ctx := context.Background()
	var r rows
	o1, _ := s.LatestOffset(ctx, nil)
	if err := s.ReadBatch(ctx, nil, o1, r.emit); err != nil {
		t.Fatal(err)
	}
	n.Reorg(2)
	n.Mine(1)
	o2, err := s.LatestOffset(ctx, o1)
	if err == nil {
		err = s.ReadBatch(ctx, o1, o2, r.emit)
	}
	if !errcode.Is(err, CodeReorgDetected) {
		t.Fatalf("err %v", err)
	}
	if _, err := New(Options{Endpoints: []string{n.URL()}, ReorgDepth: 3}); !errcode.Is(err, CodeInvalidOption) {
		t.Fatalf("reorgDepth without reorg=retract: %v", err)
	}
}

// TestRetractBootstrapsHistory: a checkpoint committed without reorg=retract
// resumes with it: the history starts from the committed block.
func TestRetractBootstrapsHistory(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 12, ethnode.Faults{})
	plain, _ := openSource(t, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1, MaxBlocksPerTrigger: 50}, nil)
	ctx := context.Background()
	var r rows
	o1, _ := plain.LatestOffset(ctx, nil)
	if err := plain.ReadBatch(ctx, nil, o1, r.emit); err != nil {
		t.Fatal(err)
	}
	d := newRetractDriver(t, n, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1,
		MaxBlocksPerTrigger: 50, Reorg: ReorgRetract, ReorgDepth: 8})
	d.committed = o1
	for i := range r.number {
		d.table[r.number[i]] = blockRow{Number: r.number[i], Hash: r.hash[i], ParentHash: r.parent[i], BlockTS: r.ts[i],
			Miner: r.miner[i], TransactionCount: r.txs[i], GasUsed: r.gas[i]}
	}
	d.open()
	n.Reorg(5)
	n.Mine(2)
	if !d.step(crashNone) || d.retracted != 5 {
		t.Fatalf("retracted %d", d.retracted)
	}
	d.checkCanonical(m.LastBlock + 1)
}

func TestHistoryRoundTrip(t *testing.T) {
	h := &history{}
	parent := "0x" + strings.Repeat("ab", 32)
	for i := range 5 {
		hash := fmt.Sprintf("0x%064x", 1000+i)
		h.blocks = append(h.blocks, blockRow{Number: int64(100 + i), Hash: hash, ParentHash: parent, BlockTS: int64(i) * 12_000_000,
			Miner: fmt.Sprintf("0x%040x", i), TransactionCount: int64(i), GasUsed: int64(i * 21000)})
		parent = hash
	}
	data := h.encode()
	end := Offset{Block: 104, Hash: h.last().Hash}
	got, err := parseHistory(data, 10, &end)
	if err != nil || fmt.Sprint(got.blocks) != fmt.Sprint(h.blocks) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{
		strings.Replace(string(data), `"version":2`, `"version":3`, 1),
		strings.Replace(string(data), `"number":102`, `"number":109`, 1),
		strings.Replace(string(data), `"gas_used":0`, `"gas_used":-1`, 1),
		strings.Replace(string(data), `"miner"`, `"minr"`, 1),
		strings.Replace(string(data), "0x00000000000000000000000000000000000000000000000000000000000003e9", "0x00000000000000000000000000000000000000000000000000000000000003E9", 1),
		string(data) + "{}",
	} {
		if _, err := parseHistory([]byte(bad), 10, &end); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := parseHistory(data, 4, &end); err == nil {
		t.Error("accepted more blocks than the limit")
	}
	other := Offset{Block: 104, Hash: parent[:len(parent)-1] + "0"}
	if _, err := parseHistory(data, 10, &other); err == nil {
		t.Error("accepted a history ending elsewhere")
	}
	// A corrupt file is CHECKPOINT_CORRUPT with its path.
	dir := t.TempDir()
	l := historyLog{fs: vfs.Default, dir: dir}
	if err := os.WriteFile(l.path(end), data[:40], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.load(end); !errcode.Is(err, errcode.CheckpointCorrupt) || !strings.Contains(err.Error(), l.path(end)) {
		t.Fatalf("load corrupt: %v", err)
	}
}

// FuzzParseHistory: the parser never panics, and what it accepts encodes
// back to bytes it accepts again as the same history (byte-stable).
func FuzzParseHistory(f *testing.F) {
	h := &history{blocks: []blockRow{{Number: 7, Hash: "0x" + strings.Repeat("1", 64), ParentHash: "0x" + strings.Repeat("2", 64),
		BlockTS: 12, Miner: "0x" + strings.Repeat("3", 40), TransactionCount: 1, GasUsed: 2}}}
	f.Add(h.encode())
	f.Add([]byte(`{"version":1,"blocks":[]}`))
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseHistory(data, 100, nil)
		if err != nil {
			return
		}
		enc := got.encode()
		again, err := parseHistory(enc, 100, nil)
		if err != nil || fmt.Sprint(again.blocks) != fmt.Sprint(got.blocks) || string(again.encode()) != string(enc) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzParseOffset: offsets (with and without fork) never panic the parser
// and re-render byte-identically.
func FuzzParseOffset(f *testing.F) {
	f.Add([]byte(`{"block":5,"hash":"0x` + strings.Repeat("a", 64) + `"}`))
	f.Add([]byte(`{"block":5,"hash":"0x` + strings.Repeat("a", 64) + `","fork":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, ok, err := ParseOffset(data)
		if err != nil || !ok {
			return
		}
		o2, ok2, err := ParseOffset(o.JSON())
		if err != nil || !ok2 || o2 != o || string(o2.JSON()) != string(o.JSON()) {
			t.Fatalf("round trip %s -> %s: %v", data, o.JSON(), err)
		}
	})
}

// TestRetractShorterChain: on go-ethereum's simulated backend the chain is
// forked 4 blocks back and grows by one only, so the new head is below the
// emitted tip; the batch retracts 4 blocks and inserts 1.
func TestRetractShorterChain(t *testing.T) {
	n := newSimNode(t)
	n.mine(12)
	d := &retractDriver{t: t, o: Options{Endpoints: []string{n.url}, StartBlock: 1, MaxBlocksPerTrigger: 50,
		Reorg: ReorgRetract, ReorgDepth: 8}, fs: vfs.Default, dir: t.TempDir(), table: map[int64]blockRow{}}
	d.open()
	if !d.step(crashNone) || len(d.table) != 12 {
		t.Fatalf("first batch: %d rows", len(d.table))
	}
	if err := n.sim.Fork(n.block(8).Hash()); err != nil {
		t.Fatal(err)
	}
	n.sendTxs(1) // a different block 9
	n.mine(1)
	if !d.step(crashNone) || d.retracted != 4 || len(d.table) != 9 {
		t.Fatalf("retracted %d, %d rows", d.retracted, len(d.table))
	}
	if got := mustOffset(t, d.committed); got.Block != 9 || !got.HasFork || got.Fork != 8 ||
		got.Hash != strings.ToLower(n.block(9).Hash().Hex()) {
		t.Fatalf("end %s", d.committed)
	}
}
