package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/storage/s3test"
	"github.com/ethstream/ethstream/stream"
)

// TestLifecycleOnS3 runs the whole source-evolution lifecycle with the
// checkpoint and the table on each S3 server (the embedded endpoint and
// Versity Gateway): backfill the archive, add a named live source one block
// past it, retire the archive (its name is then refused), shrink the state
// 4 -> 2 partitions by a REPARTITION batch, and run on. The table is the
// archive's recount plus exactly the live blocks read, under one query id
// with contiguous batch ids, and the repartition kept every key.
func TestLifecycleOnS3(t *testing.T) {
	archive := mustArchive(t)
	want := recount(t, archive)
	m, err := archivegen.ReadManifest(archive)
	if err != nil {
		t.Fatal(err)
	}
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		ctx := context.Background()
		node, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 1, Addr: "127.0.0.1:0", Manual: true, InitialBlocks: 60})
		if err != nil {
			t.Fatal(err)
		}
		defer node.Close()
		ckpt, table := s.Location("life/checkpoint"), s.Location("life/table")
		var events []*stream.Progress
		cfg := s3Config(ckpt, table, t.TempDir(), archiveURI(t))
		cfg.Conf["spark.sql.shuffle.partitions"] = "4"
		cfg.Conf["spark.sql.streaming.offsetLog.formatVersion"] = "2"
		cfg.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) { events = append(events, p) })}
		run := func(what string, c Config) {
			t.Helper()
			if _, err := Run(ctx, c); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}

		run("backfill", cfg)
		backfillBatches := len(events)
		live := SourceSpec{Name: "eth_live", Format: "ethrpc", URI: fmt.Sprintf(
			"%s?maxBlocksPerTrigger=10&start_block=%d&confirmations=0&start_parent_hash=%s", node.URL(), m.LastBlock+1, m.LastHash)}
		cfg.Sources = append(cfg.Sources, live)
		cfg.Trigger = engine.Trigger{Kind: engine.ProcessingTime, Interval: time.Millisecond}
		cfg.MaxBatches = 2
		run("add the live source", cfg)

		cfg.Sources = []SourceSpec{live}
		run("retire the archive", cfg)
		reuse := cfg
		reuse.Sources = []SourceSpec{live, {Name: flSource, Format: "s3archive", URI: archiveURI(t)}}
		if _, err := Run(ctx, reuse); !errcode.Is(err, errcode.TombstoneNameReuse) {
			t.Fatalf("reusing the retired name = %v, want %s", err, errcode.TombstoneNameReuse)
		}

		keysBefore := events[len(events)-1].StateOperators[0].NumRowsTotal
		shrink := cfg
		shrink.Conf = map[string]string{}
		for k, v := range cfg.Conf {
			shrink.Conf[k] = v
		}
		shrink.Conf["spark.sql.streaming.stateStore.partitions"] = "2"
		run("shrink the state to 2 partitions", shrink)

		ids := map[string]bool{}
		var repartitions int
		for i, p := range events {
			ids[p.ID] = true
			if p.BatchID != int64(i) {
				t.Fatalf("event %d has batch id %d: ids not contiguous from 0", i, p.BatchID)
			}
			if p.Kind() == stream.KindRepartition {
				repartitions++
				if got := p.StateOperators[0].NumRowsTotal; got != keysBefore {
					t.Fatalf("repartition: %d keys after, %d before", got, keysBefore)
				}
			}
		}
		if len(ids) != 1 || repartitions != 1 || backfillBatches == 0 {
			t.Fatalf("%d query ids, %d repartition batches, %d backfill batches", len(ids), repartitions, backfillBatches)
		}

		got := locTableCounts(t, table)
		var liveBlocks int64
		archived := map[windowKey]int64{}
		for k, c := range got {
			if k.source == live.Name {
				liveBlocks += c
			} else {
				archived[k] = c
			}
		}
		if d := diffCounts(want, archived); d != "" {
			t.Fatalf("archive rows of the table: %s", d)
		}
		// 2 batches with both sources, 2 with the live one alone, 2 after the
		// shrink's control batch: 10 blocks each.
		if liveBlocks != 60 {
			t.Fatalf("the table counts %d live blocks, want 60", liveBlocks)
		}
	})
}
