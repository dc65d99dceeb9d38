package ethrpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// drive plans and reads batches until the source reports no new data,
// checking that every batch advances by at most max blocks.
func drive(t *testing.T, s *Source, start stream.Offset, max int, out *rows) (stream.Offset, []stream.Offset) {
	t.Helper()
	ctx := context.Background()
	var ends []stream.Offset
	for {
		end, err := s.LatestOffset(ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		if string(end) == string(start) {
			return start, ends
		}
		e := mustOffset(t, end)
		if start != nil {
			if st := mustOffset(t, start); e.Block <= st.Block || e.Block-st.Block > uint64(max) {
				t.Fatalf("batch (%d, %d] breaks maxBlocksPerTrigger %d", st.Block, e.Block, max)
			}
		}
		if err := s.ReadBatch(ctx, start, end, out.emit); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
		start = end
	}
}

// checkAgainstChain compares emitted rows with the node's canonical blocks.
func checkAgainstChain(t *testing.T, n *simNode, r *rows, first uint64) {
	t.Helper()
	for i := range r.number {
		num := first + uint64(i)
		if r.number[i] != int64(num) {
			t.Fatalf("row %d is block %d, want %d", i, r.number[i], num)
		}
		b := n.block(num)
		h := b.Header()
		want := []string{b.Hash().Hex(), h.ParentHash.Hex(), strings.ToLower(h.Coinbase.Hex())}
		got := []string{r.hash[i], r.parent[i], r.miner[i]}
		for j := range want {
			if strings.ToLower(want[j]) != got[j] {
				t.Fatalf("block %d field %d: got %s want %s", num, j, got[j], want[j])
			}
		}
		if r.ts[i] != int64(h.Time)*1_000_000 || r.gas[i] != int64(h.GasUsed) || r.txs[i] != int64(len(b.Transactions())) {
			t.Fatalf("block %d: ts %d gas %d txs %d, want %d %d %d", num, r.ts[i], r.gas[i], r.txs[i],
				h.Time*1_000_000, h.GasUsed, len(b.Transactions()))
		}
	}
}

func TestFollowHead(t *testing.T) {
	n := newSimNode(t)
	n.mine(10)
	n.sendTxs(3)
	n.mine(55) // head 65, block 11 holds 3 transactions
	s, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 1}, nil)

	var r rows
	end, ends := drive(t, s, nil, 20, &r)
	// The first batch covers start_block .. start_block+19, later ones 20 each.
	var got []uint64
	for _, e := range ends {
		got = append(got, mustOffset(t, e).Block)
	}
	if want := []uint64{20, 40, 60, 65}; !equalU(got, want) {
		t.Fatalf("batch ends %v, want %v", got, want)
	}
	if len(r.number) != 65 {
		t.Fatalf("read %d blocks, want 65", len(r.number))
	}
	checkAgainstChain(t, n, &r, 1)
	if r.txs[10] != 3 {
		t.Fatalf("block 11 transaction_count %d, want 3", r.txs[10])
	}

	// The head moves: the source follows it from its last offset.
	n.mine(25)
	end2, ends2 := drive(t, s, end, 20, &r)
	if mustOffset(t, end2).Block != 90 || len(ends2) != 2 {
		t.Fatalf("after mining: end %s in %d batches", end2, len(ends2))
	}
	checkAgainstChain(t, n, &r, 1)
	if got := string(s.ReportLatestOffset()); got != string(end2) {
		t.Fatalf("ReportLatestOffset %s, want %s", got, end2)
	}
	m := s.Metrics()
	if m["head"] != "90" || m["requests"] == "0" || m["retries"] != "0" {
		t.Fatalf("metrics %v", m)
	}
}

func equalU(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStartAtHeadWhenNoStartBlock(t *testing.T) {
	n := newSimNode(t)
	n.mine(30)
	s, _ := openSource(t, Options{Endpoints: []string{n.url}}, nil)
	var r rows
	end, err := s.LatestOffset(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := mustOffset(t, end); e.Block != 30 {
		t.Fatalf("first offset %v, want the head 30", e)
	}
	if err := s.ReadBatch(context.Background(), nil, end, r.emit); err != nil {
		t.Fatal(err)
	}
	if len(r.number) != 1 || r.number[0] != 30 {
		t.Fatalf("first batch %v, want block 30 only", r.number)
	}
}

func TestRestartMidStream(t *testing.T) {
	n := newSimNode(t)
	n.mine(70)
	s1, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 5}, nil)
	ctx := context.Background()
	var r rows
	o1, _ := s1.LatestOffset(ctx, nil)
	if err := s1.ReadBatch(ctx, nil, o1, r.emit); err != nil {
		t.Fatal(err)
	}
	o2, _ := s1.LatestOffset(ctx, o1)
	if err := s1.ReadBatch(ctx, o1, o2, r.emit); err != nil {
		t.Fatal(err)
	}
	_ = s1.Close()

	// A new process: start_block changed, but the committed offset wins.
	s2, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 60}, o2)
	// Re-running the committed batch's successor from the offset log.
	end, _ := drive(t, s2, o2, 20, &r)
	if mustOffset(t, end).Block != 70 {
		t.Fatalf("end %s", end)
	}
	checkAgainstChain(t, n, &r, 5)
	// With start nil but a committed offset the source resumes after the
	// committed offset, never from start_block.
	o, err := s2.LatestOffset(ctx, nil)
	if err != nil || mustOffset(t, o).Block != mustOffset(t, o2).Block+20 {
		t.Fatalf("LatestOffset(nil) with committed %s = %s, %v", o2, o, err)
	}
	// A re-run of a planned batch yields byte-identical rows.
	var a, b rows
	if err := s2.ReadBatch(ctx, o1, o2, a.emit); err != nil {
		t.Fatal(err)
	}
	if err := s2.ReadBatch(ctx, o1, o2, b.emit); err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.hash, ",") != strings.Join(b.hash, ",") || len(a.hash) != 20 {
		t.Fatal("re-run differs")
	}
}

func TestReorgAgainstConfirmations(t *testing.T) {
	for _, tc := range []struct {
		name          string
		confirmations uint64
		depth         int
		wantErr       string
	}{
		{"shallower than confirmations is invisible", 5, 3, ""},
		{"equal depth is invisible", 3, 3, ""},
		{"deeper than confirmations", 2, 3, CodeReorgDetected},
		{"no confirmations", 0, 1, CodeReorgDetected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newSimNode(t)
			n.mine(40)
			s, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 1, MaxBlocksPerTrigger: 100,
				Confirmations: tc.confirmations}, nil)
			ctx := context.Background()
			var r rows
			o1, err := s.LatestOffset(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustOffset(t, o1).Block; got != 40-tc.confirmations {
				t.Fatalf("readable end %d, want %d", got, 40-tc.confirmations)
			}
			if err := s.ReadBatch(ctx, nil, o1, r.emit); err != nil {
				t.Fatal(err)
			}
			oldHead := n.block(40).Hash()
			n.reorg(tc.depth, 4)
			if n.block(40).Hash() == oldHead {
				t.Fatal("reorg did not change block 40")
			}
			before := len(r.number)
			o2, err := s.LatestOffset(ctx, o1)
			if err != nil {
				t.Fatal(err)
			}
			err = s.ReadBatch(ctx, o1, o2, r.emit)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				checkAgainstChain(t, n, &r, 1) // one chain, the new canonical one
				return
			}
			if !errcode.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %s", err, tc.wantErr)
			}
			if len(r.number) != before {
				t.Fatal("rows emitted from a broken chain")
			}
			st := mustOffset(t, o1)
			for _, want := range []string{st.Hash, itoa(st.Block), itoa(st.Block + 1), "confirmations"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestPlannedBatchRerunAfterReorg(t *testing.T) {
	n := newSimNode(t)
	n.mine(40)
	s, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 1}, nil)
	ctx := context.Background()
	var r rows
	o1, _ := s.LatestOffset(ctx, nil)
	if err := s.ReadBatch(ctx, nil, o1, r.emit); err != nil {
		t.Fatal(err)
	}
	o2, _ := s.LatestOffset(ctx, o1) // planned (20, 40], recorded in the offset log
	n.reorg(10, 2)                   // blocks 31.. replaced; block 21's parent is intact
	err := s.ReadBatch(ctx, o1, o2, r.emit)
	if !errcode.Is(err, CodeReorgDetected) || !strings.Contains(err.Error(), mustOffset(t, o2).Hash) {
		t.Fatalf("err %v, want REORG_DETECTED naming the recorded hash", err)
	}
	if len(r.number) != 20 {
		t.Fatalf("emitted %d rows, want only the first batch's 20", len(r.number))
	}
}

func TestSeam(t *testing.T) {
	n := newSimNode(t)
	n.mine(30)
	parent := strings.ToLower(n.block(10).Hash().Hex())
	wrong := "0x" + strings.Repeat("ab", 32)

	s, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 11, StartParentHash: wrong}, nil)
	ctx := context.Background()
	var r rows
	o1, err := s.LatestOffset(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.ReadBatch(ctx, nil, o1, r.emit)
	if !errcode.Is(err, CodeSeamMismatch) || len(r.number) != 0 {
		t.Fatalf("err %v rows %d, want SEAM_MISMATCH and nothing emitted", err, len(r.number))
	}
	for _, want := range []string{wrong, parent, "11", "10"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}

	// Hashes compare case-insensitively.
	if _, err := New(Options{Endpoints: []string{n.url}, StartBlock: 11, StartParentHash: "0x" + strings.ToUpper(parent[2:])}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Endpoints: []string{n.url}, StartParentHash: "0x12"}); !errcode.Is(err, CodeInvalidOption) {
		t.Fatalf("short start_parent_hash accepted: %v", err)
	}
	s3, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 11, StartParentHash: parent}, nil)
	if err := s3.ReadBatch(ctx, nil, o1, r.emit); err != nil || r.number[0] != 11 {
		t.Fatalf("correct seam refused: %v", err)
	}
}

func TestThrottleAndServerErrors(t *testing.T) {
	n := newSimNode(t)
	n.mine(25)
	s, clk := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 1}, nil)
	ctx := context.Background()
	o1, err := s.LatestOffset(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}

	// A burst of 429s with Retry-After: 3 seconds each, then success.
	n.faults.inject("3", 429, 429, 429)
	var r rows
	if err := s.ReadBatch(ctx, nil, o1, r.emit); err != nil {
		t.Fatal(err)
	}
	m := s.Metrics()
	if m["throttles"] != "3" || m["retries"] != "3" || m["requestRate"] == "unlimited" {
		t.Fatalf("after 429 burst: %v", m)
	}
	var retryWaits int
	for _, d := range clk.Sleeps() {
		if d >= 3*time.Second {
			retryWaits++
		}
	}
	if retryWaits != 3 {
		t.Fatalf("sleeps %v: want 3 honouring Retry-After", clk.Sleeps())
	}

	// The limiter recovers additively once requests succeed again.
	for range 60 {
		if _, err := s.LatestOffset(ctx, o1); err != nil {
			t.Fatal(err)
		}
	}
	if m := s.Metrics(); m["requestRate"] != "unlimited" {
		t.Fatalf("rate did not recover: %v", m)
	}

	// 5xx without Retry-After: exponential backoff with jitter; no limiter.
	n.faults.inject("", 500, 502, 503)
	before := len(clk.Sleeps())
	o2, err := s.LatestOffset(ctx, o1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReadBatch(ctx, o1, o2, r.emit); err != nil {
		t.Fatal(err)
	}
	checkAgainstChain(t, n, &r, 1)
	backoffs := clk.Sleeps()[before:]
	if len(backoffs) != 3 || s.Metrics()["throttles"] != "3" {
		t.Fatalf("backoffs %v", clk.Sleeps()[before:])
	}
	for i, d := range backoffs {
		hi := backoffBase << i
		if d < hi/2 || d > hi {
			t.Fatalf("backoff %d = %v, want in [%v, %v]", i, d, hi/2, hi)
		}
	}

	// A persistent outage exhausts the retry budget with a coded error.
	s2, _ := openSource(t, Options{Endpoints: []string{n.url}, MaxRetries: 2}, nil)
	n.faults.inject("", 503, 503, 503, 503)
	if _, err := s2.LatestOffset(ctx, nil); !errcode.Is(err, CodeRPCUnavailable) {
		t.Fatalf("err %v, want RPC_UNAVAILABLE", err)
	}
}

func TestBatchSplitting(t *testing.T) {
	n := newSimNode(t)
	n.mine(45)
	n.rpc.SetBatchLimits(7, 0) // the endpoint answers "batch too large" above 7 calls
	s, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 1, MaxBlocksPerTrigger: 45}, nil)
	var r rows
	end, _ := drive(t, s, nil, 45, &r)
	if mustOffset(t, end).Block != 45 || len(r.number) != 45 {
		t.Fatalf("end %s rows %d", end, len(r.number))
	}
	checkAgainstChain(t, n, &r, 1)
	m := s.Metrics()
	if m["batchSplits"] == "0" || m["batchSize"] == "100" {
		t.Fatalf("no split recorded: %v", m)
	}
	// The first requests were oversized and refused.
	var big int
	for _, z := range n.faults.sizes() {
		if z > 7 {
			big++
		}
	}
	if big == 0 {
		t.Fatalf("no oversized batch sent: %v", n.faults.sizes())
	}
	// After learning, no more oversized batches are sent: the next blocks
	// go in batches of at most 7. (Counted by the blocks a batch asks for,
	// not by arrival: a cancelled oversized request of the first range may
	// reach the server after the successful ones.)
	n.mine(45)
	var r3 rows
	if end, _ = drive(t, s, end, 45, &r3); mustOffset(t, end).Block != 90 || len(r3.number) != 45 {
		t.Fatalf("end %s rows %d", end, len(r3.number))
	}
	checkAgainstChain(t, n, &r3, 46)
	later := n.faults.sizesFrom(46)
	if len(later) == 0 {
		t.Fatal("no batch request for blocks 46..90")
	}
	for _, z := range later {
		if z > 7 {
			t.Fatalf("batch of %d calls after the endpoint refused 8: %v", z, later)
		}
	}

	// MaxBatchSize bounds the batch requests from the start.
	n2 := newSimNode(t)
	n2.mine(20)
	s2, _ := openSource(t, Options{Endpoints: []string{n2.url}, StartBlock: 1, MaxBatchSize: 6}, nil)
	var r2 rows
	drive(t, s2, nil, 20, &r2)
	for _, z := range n2.faults.sizes() {
		if z > 6 {
			t.Fatalf("batch of %d > MaxBatchSize 6", z)
		}
	}
	if len(r2.number) != 20 {
		t.Fatalf("rows %d", len(r2.number))
	}
}

func TestFailover(t *testing.T) {
	n := newSimNode(t)
	n.mine(30)
	s, clk := openSource(t, Options{Endpoints: []string{deadURL(t), n.url}, StartBlock: 1}, nil)
	var r rows
	drive(t, s, nil, 20, &r)
	if len(r.number) != 30 {
		t.Fatalf("rows %d", len(r.number))
	}
	m := s.Metrics()
	if m["failovers"] != "1" || !strings.Contains(n.url, m["activeEndpoint"][len("http://"):]) {
		t.Fatalf("metrics %v", m)
	}
	if len(clk.Sleeps()) != 0 {
		t.Fatalf("failover to a healthy endpoint slept %v", clk.Sleeps())
	}
	// Both dead: a coded error after the retry budget.
	s2, _ := openSource(t, Options{Endpoints: []string{deadURL(t), deadURL(t)}, MaxRetries: 3}, nil)
	if _, err := s2.LatestOffset(context.Background(), nil); !errcode.Is(err, CodeRPCUnavailable) {
		t.Fatalf("err %v", err)
	}
}

func TestFinalityAndAvailableNow(t *testing.T) {
	n := newSimNode(t)
	n.mine(40) // the simulated beacon finalises at multiples of 32
	ctx := context.Background()
	s, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 1, MaxBlocksPerTrigger: 100, Finality: "finalized"}, nil)
	o, err := s.LatestOffset(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustOffset(t, o).Block; got != 32 {
		t.Fatalf("finalized end %d, want 32", got)
	}
	s2, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 1, MaxBlocksPerTrigger: 100, Finality: "safe", Confirmations: 4}, nil)
	if o, _ := s2.LatestOffset(ctx, nil); mustOffset(t, o).Block != 36 {
		t.Fatalf("safe with 4 confirmations: %s, want 36", o)
	}

	s3, _ := openSource(t, Options{Endpoints: []string{n.url}, StartBlock: 1}, nil)
	if err := s3.PrepareAvailableNow(ctx); err != nil {
		t.Fatal(err)
	}
	n.mine(10)
	var r rows
	end, _ := drive(t, s3, nil, 20, &r)
	if mustOffset(t, end).Block != 40 {
		t.Fatalf("availableNow went past its head: %s", end)
	}
}

func TestProjection(t *testing.T) {
	n := newSimNode(t)
	n.mine(3)
	s, err := New(Options{Endpoints: []string{n.url}, StartBlock: 1})
	if err != nil {
		t.Fatal(err)
	}
	env := stream.SourceEnv{Columns: []string{ethblock.ColMiner, ethblock.ColBlockTS}, Clock: newFakeClock()}
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o, _ := s.LatestOffset(context.Background(), nil)
	err = s.ReadBatch(context.Background(), nil, o, func(b *stream.Batch) error {
		if len(b.Columns) != 2 || b.Columns[0].Name != ethblock.ColMiner || b.Columns[1].Type != stream.Timestamp || b.Len != 3 {
			t.Fatalf("batch %+v", b)
		}
		return b.Validate()
	})
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := New(Options{Endpoints: []string{n.url}})
	if err := bad.Open(context.Background(), stream.SourceEnv{Columns: []string{"source"}}); !errcode.Is(err, CodeInvalidOption) {
		t.Fatalf("projection of source accepted: %v", err)
	}
}

// TestClientErrorNotRetried: a 401 (bad API key) cannot be fixed by
// retrying; it fails at once with a coded error that hides the key.
func TestClientErrorNotRetried(t *testing.T) {
	n := newSimNode(t)
	n.mine(2)
	s, _ := openSource(t, Options{Endpoints: []string{n.url + "/v3/SECRETKEY"}}, nil)
	n.faults.inject("", 401)
	_, err := s.LatestOffset(context.Background(), nil)
	if !errcode.Is(err, CodeRPCRequestFailed) || s.Metrics()["retries"] != "0" || strings.Contains(err.Error(), "SECRETKEY") {
		t.Fatalf("err %v metrics %v", err, s.Metrics())
	}
}
