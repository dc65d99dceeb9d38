package ethrpc

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// tableDriver plays the engine around a table source with
// reorg=retract, as retractDriver does for blocks: the committed offset,
// a planned batch pending across a crash, and the live rows (a multiset of
// rendered rows) the committed batches leave.
type tableDriver struct {
	t                   *testing.T
	o                   Options
	dir                 string
	src                 *Source
	committed, pending  stream.Offset
	firstRun            []string
	live                map[string]int
	retracted, inserted int
}

func (d *tableDriver) open() {
	d.t.Helper()
	if d.src != nil {
		_ = d.src.Close()
	}
	s, err := New(d.o)
	if err != nil {
		d.t.Fatal(err)
	}
	env := stream.SourceEnv{Name: "eth_live", MetadataDir: d.dir, FS: vfs.Default, Committed: d.committed,
		Clock: newFakeClock(), Logger: slog.New(slog.DiscardHandler)}
	if err := s.Open(context.Background(), env); err != nil {
		d.t.Fatal(err)
	}
	d.src = s
	d.t.Cleanup(func() { _ = s.Close() })
}

// step runs one trigger with a crash at point crash; false when no batch
// was planned.
func (d *tableDriver) step(crash int) bool {
	d.t.Helper()
	ctx := context.Background()
	end := d.pending
	if end == nil {
		var err error
		if end, err = d.src.LatestOffset(ctx, d.committed); err != nil {
			d.t.Fatal(err)
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
	var got []string
	err := d.src.ReadBatch(ctx, d.committed, end, func(b *stream.Batch) error {
		if crash == crashMidRead {
			return fmt.Errorf("injected failure")
		}
		for i := range b.Len {
			sign := "+"
			if b.Signs != nil && b.Signs[i] < 0 {
				sign = "-"
			}
			got = append(got, sign+strings.TrimPrefix(streamtest.Row(b, i), "- "))
		}
		return nil
	})
	if crash == crashMidRead {
		d.open()
		return true
	}
	if err != nil {
		d.t.Fatalf("ReadBatch(%s, %s): %v", d.committed, end, err)
	}
	if d.firstRun != nil && fmt.Sprint(d.firstRun) != fmt.Sprint(got) {
		d.t.Fatalf("re-run of batch (%s, %s] read other rows", d.committed, end)
	}
	if crash == crashBeforeCommit {
		d.firstRun = got
		d.open()
		return true
	}
	for _, r := range got {
		row := r[1:]
		if r[0] == '-' {
			if d.live[row] != 1 {
				d.t.Fatalf("retraction of a row the table does not hold (%d): %s", d.live[row], row)
			}
			delete(d.live, row)
			d.retracted++
			continue
		}
		if d.live[row] != 0 {
			d.t.Fatalf("row inserted twice: %s", row)
		}
		d.live[row] = 1
		d.inserted++
	}
	d.committed, d.pending, d.firstRun = end, nil, nil
	if crash == crashAfterCommit {
		d.open()
		return true
	}
	if err := d.src.Commit(ctx, end); err != nil {
		d.t.Fatal(err)
	}
	return true
}

// TestRetractTableRows: a transactions, logs or token_transfers source
// with reorg=retract, through random blocks and reorgs and a crash at
// every step of batches, retracts every row of every orphaned block exactly once (a retraction
// takes back a row the table holds, as emitted; no row is inserted twice),
// and after catching up its rows are exactly those a fresh source without
// retraction reads of the canonical chain.
func TestRetractTableRows(t *testing.T) {
	m := testManifest(t)
	for _, table := range []string{"transactions", "logs", "token_transfers"} {
		t.Run(table, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, uint64(len(table))))
			n := startChainNode(t, 4, ethnode.Faults{})
			const depth = 4
			d := &tableDriver{t: t, dir: t.TempDir(), live: map[string]int{}, o: Options{Endpoints: []string{n.URL()},
				StartBlock: m.LastBlock + 1, MaxBlocksPerTrigger: 3, Reorg: ReorgRetract, ReorgDepth: depth, Table: table}}
			d.open()
			for iter := 0; iter < 30; iter++ {
				switch x := rng.IntN(10); {
				case x < 4:
					n.Mine(1 + rng.IntN(3))
				case x < 7:
					n.Reorg(1 + rng.IntN(depth))
				}
				c := crashNone
				if rng.IntN(2) == 0 {
					c = 1 + rng.IntN(numCrashPoints-1)
				}
				d.step(c)
			}
			for d.step(crashNone) || d.pending != nil {
			}
			if d.retracted == 0 {
				t.Fatal("no row was retracted: the test lost its point")
			}
			fresh, err := New(Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1, MaxBlocksPerTrigger: 50, Table: table})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{}
			r := &tableDriver{t: t, src: fresh, live: want}
			if err := fresh.Open(context.Background(), stream.SourceEnv{Name: "fresh", Clock: newFakeClock(), Logger: slog.New(slog.DiscardHandler)}); err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			for r.step(crashNone) {
			}
			if len(want) != len(d.live) {
				t.Fatalf("the retracting source holds %d rows, the canonical chain %d", len(d.live), len(want))
			}
			for row := range want {
				if d.live[row] != 1 {
					t.Fatalf("canonical row missing: %s", row)
				}
			}
			t.Logf("%d rows inserted, %d retracted, %d left", d.inserted, d.retracted, len(d.live))
		})
	}
}
