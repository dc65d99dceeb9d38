package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/stream"
)

// TestRealTimeFollowsNewHeads runs the reference query under trigger
// realTime with a fallback poll of an hour, so every batch after the first
// is started by a newHeads notification, against the in-repo node over ws:
// blocks one at a time, the node dropping every websocket mid-run, a reorg
// of the head at zero confirmations (reorg=retract), more blocks. The table
// then holds exactly the canonical chain's counts: nothing lost, nothing
// counted twice.
func TestRealTimeFollowsNewHeads(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	m := testManifest(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 5, Addr: "127.0.0.1:0", Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dir := t.TempDir()
	first := m.LastBlock + 1
	var mu sync.Mutex
	var last ethrpc.Offset
	cfg := Config{
		Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "table"), LocalDir: filepath.Join(dir, "cache"),
		Sources: []SourceSpec{{Name: "eth_live", Format: "ethrpc", URI: fmt.Sprintf(
			"%s?start_block=%d&start_parent_hash=%s&confirmations=0&reorg=retract&reorgDepth=8",
			n.WebsocketURL(), first, m.LastHash)}},
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true",
			"spark.sql.streaming.offsetLog.formatVersion": "2", "spark.sql.shuffle.partitions": "4"},
		Trigger: engine.Trigger{Kind: engine.RealTime, Interval: time.Hour},
		Logger:  slog.New(slog.DiscardHandler),
		Listeners: []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
			if p.Kind() != stream.KindData {
				return
			}
			if o, ok, _ := ethrpc.ParseOffset(p.Sources[0].EndOffset); ok {
				mu.Lock()
				last = o
				mu.Unlock()
			}
		})},
	}
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	// awaitHead waits for a committed batch ending at the node's head.
	awaitHead := func(what string) {
		t.Helper()
		t0 := time.Now()
		defer func() { t.Logf("%s: %v", what, time.Since(t0)) }()
		want := n.Header(n.Head())
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got := last
			mu.Unlock()
			if got.Block == want.Number.Uint64() && strings.EqualFold(got.Hash, want.Hash().Hex()) {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("%s: the run ended: %v", what, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: committed %+v, head %d %s", what, got, want.Number, want.Hash().Hex())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	n.Mine(1)
	awaitHead("first block") // the first batch needs no notification
	for range 4 {
		n.Mine(1)
		awaitHead("a new head")
	}
	if n.DropWebsockets() == 0 {
		t.Fatal("no websocket to drop")
	}
	n.Mine(3)
	awaitHead("blocks mined while the subscription was down")
	n.Reorg(3)
	awaitHead("a reorg of the head")
	n.Mine(2)
	awaitHead("blocks after the reorg")
	tc := time.Now()
	cancel()
	defer func() { t.Logf("run ended %v after the cancel", time.Since(tc)) }()
	// Cancelled between batches the run ends cleanly; inside the trigger's
	// LatestOffset (realTime asks again right after each batch) with the
	// context's error, as under any trigger.
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	got, want := tableCounts(t, cfg.Table), canonicalCounts(n, first)
	if !maps.Equal(got, want) {
		t.Fatalf("table %v, canonical chain %v", got, want)
	}
}
