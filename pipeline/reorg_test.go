package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/stream"
)

var (
	manifestOnce sync.Once
	manifest     *archivegen.Manifest
	manifestErr  error
)

// testManifest is a one-day synthetic archive; only its last header is used
// (the node continues its chain).
func testManifest(t *testing.T) *archivegen.Manifest {
	t.Helper()
	manifestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pipeline-archive-")
		if err != nil {
			manifestErr = err
			return
		}
		defer os.RemoveAll(dir)
		manifest, manifestErr = archivegen.Generate(context.Background(), archivegen.Options{Out: dir, Preset: chain.LastDaysPreset(1), Seed: 5})
	})
	if manifestErr != nil {
		t.Fatal(manifestErr)
	}
	return manifest
}

// The crash points of a retracting batch, in the order the engine meets
// them: streamtest.Points schedules, hit by the wrappers below (the source,
// sink and operator are the real ones: each wrapper embeds its concrete
// type so that every optional interface the engine asks for stays).
var crashPoints = []string{"read-start", "read-mid", "before-sink", "after-sink", "after-state-commit", "source-commit"}

type crashSource struct {
	*ethrpc.Source
	points *streamtest.Points
}

func (s *crashSource) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	if err := s.points.Hit("read-start"); err != nil {
		return err
	}
	n := 0
	return s.Source.ReadBatch(ctx, start, end, func(b *stream.Batch) error {
		if n++; n > 1 || !s.points.Next("read-mid") {
			return emit(b)
		}
		// Half of the first chunk reaches the operator, then the process dies.
		half := *b
		half.Len = b.Len / 2
		half.Columns = make([]stream.Column, len(b.Columns))
		for i, c := range b.Columns {
			c.Int64s, c.Strings = c.Int64s[:min(len(c.Int64s), half.Len)], c.Strings[:min(len(c.Strings), half.Len)]
			half.Columns[i] = c
		}
		if b.Signs != nil {
			half.Signs = b.Signs[:half.Len]
		}
		if err := emit(&half); err != nil {
			return err
		}
		return s.points.Hit("read-mid")
	})
}

func (s *crashSource) Commit(ctx context.Context, end stream.Offset) error {
	if err := s.points.Hit("source-commit"); err != nil {
		return err
	}
	return s.Source.Commit(ctx, end)
}

type crashSink struct {
	*delta.MergeSink
	points *streamtest.Points
}

func (s *crashSink) AddBatch(ctx context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	if err := s.points.Hit("before-sink"); err != nil {
		return stream.SinkProgress{}, err
	}
	p, err := s.MergeSink.AddBatch(ctx, id, out)
	if err == nil {
		err = s.points.Hit("after-sink")
	}
	return p, err
}

type crashOp struct {
	*agg.Operator
	points *streamtest.Points
}

func (o *crashOp) Commit(ctx context.Context, id int64) error {
	err := o.Operator.Commit(ctx, id)
	if err == nil {
		err = o.points.Hit("after-state-commit")
	}
	return err
}

// tableCounts reads the eth_live rows of the table: "window|miner" -> count.
func tableCounts(t *testing.T, path string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := delta.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	if err := s.Rows(ctx, func(r map[string]any) error {
		w := r["window"].(map[string]any)
		got[fmt.Sprint(w["start"].(time.Time).UnixMicro(), "|", r["miner"])] = r["count"].(int64)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// canonicalCounts recounts the node's canonical chain from first to its head.
func canonicalCounts(n *ethnode.Node, first uint64) map[string]int64 {
	want := map[string]int64{}
	size := int64(WindowSize / time.Microsecond)
	for b := first; b <= n.Head(); b++ {
		h := n.Header(b)
		ts := int64(h.Time) * 1_000_000
		want[fmt.Sprint(ts-ts%size, "|", strings.ToLower(h.Coinbase.Hex()))]++
	}
	return want
}

// chainCounts recounts the chain ending at hash (orphaned or not), walking
// parent hashes back to block first.
func chainCounts(ctx context.Context, c *ethclient.Client, hash string, first uint64) (map[string]int64, error) {
	want := map[string]int64{}
	size := int64(WindowSize / time.Microsecond)
	h := common.HexToHash(hash)
	for {
		hd, err := c.HeaderByHash(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", h.Hex(), err)
		}
		ts := int64(hd.Time) * 1_000_000
		want[fmt.Sprint(ts-ts%size, "|", strings.ToLower(hd.Coinbase.Hex()))]++
		if hd.Number.Uint64() <= first {
			return want, nil
		}
		h = hd.ParentHash
	}
}

// TestRetractCrashAtEveryStep runs the reference query over the embedded
// node with reorg=retract: after a first batch the chain is reorganised, and
// the retracting batch dies at each step in turn (in the read, before and
// after the sink's commit, after the state commit, before the source's
// commit); a second reorg happens while the query is down. The restart
// re-runs the batch, and the table ends equal to a recount of the canonical
// chain, with one Delta commit per batch.
func TestRetractCrashAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	m := testManifest(t)
	for _, point := range crashPoints {
		t.Run(point, func(t *testing.T) {
			ctx := context.Background()
			n, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 5, Addr: "127.0.0.1:0", Manual: true, InitialBlocks: 30})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			dir := t.TempDir()
			first := m.LastBlock + 1
			cfg := Config{
				Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "table"), LocalDir: filepath.Join(dir, "cache"),
				Sources: []SourceSpec{{Name: "eth_live", Format: "ethrpc", URI: fmt.Sprintf(
					"%s?maxBlocksPerTrigger=50&start_block=%d&start_parent_hash=%s&confirmations=0&reorg=retract&reorgDepth=8",
					n.URL(), first, m.LastHash)}},
				Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true",
					"spark.sql.streaming.offsetLog.formatVersion": "2", "spark.sql.shuffle.partitions": "4"},
				Trigger: engine.Trigger{Kind: engine.Once},
				Logger:  slog.New(slog.DiscardHandler),
			}
			sum, err := Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			n.Reorg(5)
			n.Mine(2)

			q, opts, err := Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			points := streamtest.MustPoints(point)
			q.Sources[0].Source = &crashSource{Source: q.Sources[0].Source.(*ethrpc.Source), points: points}
			q.Sink = &crashSink{MergeSink: q.Sink.(*delta.MergeSink), points: points}
			q.Operator = &crashOp{Operator: q.Operator.(*agg.Operator), points: points}
			if _, err := engine.Run(ctx, q, opts); !errors.Is(err, streamtest.ErrCrash) || len(points.Pending()) != 0 {
				t.Fatalf("crash at %s: run ended with %v, %v not reached", point, err, points.Pending())
			}
			n.Reorg(3) // while the query is down
			n.Mine(1)

			// After every batch the table is the recount of the chain ending
			// at the batch's end (canonical when the batch was planned).
			ec, err := ethclient.DialContext(ctx, n.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer ec.Close()
			var deleted, retracted int64
			var bad []string
			cfg.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
				var d int64
				fmt.Sscan(p.Sink.Metrics["numTargetRowsDeleted"], &d)
				deleted += d
				if len(p.StateOperators) > 0 {
					retracted += p.StateOperators[0].CustomMetrics["numRetractedRows"]
				}
				end, ok, err := ethrpc.ParseOffset(p.Sources[0].EndOffset)
				if err != nil || !ok {
					bad = append(bad, fmt.Sprintf("batch %d: end offset %s", p.BatchID, p.Sources[0].EndOffset))
					return
				}
				want, err := chainCounts(ctx, ec, end.Hash, first)
				if err != nil {
					bad = append(bad, err.Error())
				} else if got := tableCounts(t, cfg.Table); fmt.Sprint(got) != fmt.Sprint(want) {
					bad = append(bad, fmt.Sprintf("batch %d: table %v, recount of the chain ending at %s %v", p.BatchID, got, end, want))
				}
			})}
			for i := 0; i < 3; i++ { // the re-run, the second reorg, and nothing left
				if _, err := Run(ctx, cfg); err != nil {
					t.Fatalf("restart %d: %v", i, err)
				}
			}
			if len(bad) > 0 {
				t.Fatalf("crash at %s:\n%s", point, strings.Join(bad, "\n"))
			}
			got, want := tableCounts(t, cfg.Table), canonicalCounts(n, first)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("table after the crash at %s:\n%v\nrecount of the canonical chain:\n%v", point, got, want)
			}
			t.Logf("crash at %s: %d rows retracted into the aggregation, %d table rows deleted after the restart", point, retracted, deleted)
			if retracted == 0 {
				t.Fatalf("no retraction reached the operator after the restart")
			}
			tbl, _ := delta.Open(ctx, cfg.Table)
			s, err := tbl.Snapshot(ctx, -1)
			if err != nil {
				t.Fatal(err)
			}
			// v0 create, then one commit per batch id: no batch written twice.
			if v, _ := s.Txn(sum.QueryID); s.Version != v+1 {
				t.Fatalf("table version %d after batch %d: a batch was committed twice or not at all", s.Version, v)
			}
		})
	}
}
