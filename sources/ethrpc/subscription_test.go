package ethrpc

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/stream"
)

// awaitWake waits (in real time) for the source's wake-up.
func awaitWake(t *testing.T, s *Source, what string) {
	t.Helper()
	select {
	case <-s.DataReady():
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake-up %s; metrics %v", what, s.Metrics())
	}
}

// awaitSubscribes waits until the source has subscribed n times.
func awaitSubscribes(t *testing.T, s *Source, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := s.Metrics()
		if got, _ := strconv.Atoi(m["subscribes"]); got >= n && m["subscription"] == "up" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not subscribed %d times: %v", n, m)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkContiguous: the rows are blocks first..last, each once, each the
// node's canonical block.
func checkContiguous(t *testing.T, n *ethnode.Node, r *rows, first, last uint64) {
	t.Helper()
	if uint64(len(r.number)) != last-first+1 {
		t.Fatalf("read %d blocks, want %d (%d..%d)", len(r.number), last-first+1, first, last)
	}
	for i, num := range r.number {
		if uint64(num) != first+uint64(i) {
			t.Fatalf("row %d is block %d, want %d", i, num, first+uint64(i))
		}
		if h := n.Header(uint64(num)); h == nil || r.hash[i] != h.Hash().Hex() && r.hash[i] != lower(h.Hash().Hex()) {
			t.Fatalf("block %d is not the node's canonical block", num)
		}
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// TestSubscriptionWakesOnNewHead: over ws, the in-repo node's newHeads
// notification wakes the source for every mined block, and the blocks are
// then read by number, each once.
func TestSubscriptionWakesOnNewHead(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 0, ethnode.Faults{})
	s, _ := openSource(t, Options{Endpoints: []string{n.WebsocketURL()}, StartBlock: m.LastBlock + 1, StartParentHash: m.LastHash}, nil)
	awaitSubscribes(t, s, 1)
	awaitWake(t, s, "on subscribing") // the first subscription wakes once
	var r rows
	var end stream.Offset
	for i := 0; i < 5; i++ {
		n.Mine(1)
		awaitWake(t, s, "after mining block "+strconv.Itoa(i))
		end, _ = drive(t, s, end, 20, &r)
	}
	checkContiguous(t, n, &r, m.LastBlock+1, m.LastBlock+5)
	// Freshness: the fake clock stands still, so the head's notification
	// and the commit are the same instant.
	if _, ok := s.Metrics()[stream.MetricFreshnessMs]; ok {
		t.Fatal("freshness reported before any commit")
	}
	if err := s.Commit(context.Background(), end); err != nil {
		t.Fatal(err)
	}
	if got := s.Metrics()[stream.MetricFreshnessMs]; got != "0" {
		t.Fatalf("freshnessMs %q after the commit, want 0 on the fake clock", got)
	}
	if got := s.Metrics()["headNotifications"]; got != "5" {
		t.Fatalf("headNotifications %s, want 5", got)
	}
	if n.Subscribers() != 1 {
		t.Fatalf("node has %d subscribers, want 1", n.Subscribers())
	}
	if _, ok := n.AnnouncedAt(n.Header(m.LastBlock + 5).Hash()); !ok {
		t.Fatal("the node did not record the announcement of its head")
	}
}

// TestPollingOverHTTP: an http endpoint cannot notify: the source has no
// wake-up channel (trigger realTime polls) and reads the same blocks.
func TestPollingOverHTTP(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 7, ethnode.Faults{})
	s, _ := openSource(t, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1}, nil)
	if s.DataReady() != nil {
		t.Fatal("an http source offers a wake-up channel")
	}
	var r rows
	drive(t, s, nil, 20, &r)
	checkContiguous(t, n, &r, m.LastBlock+1, m.LastBlock+7)
	if _, ok := s.Metrics()["subscription"]; ok {
		t.Fatal("an http source reports a subscription")
	}
	// subscribe=off over ws polls too.
	o, err := ParseURI(n.WebsocketURL() + "?subscribe=off")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := openSource(t, o, nil)
	if s2.DataReady() != nil {
		t.Fatal("subscribe=off offers a wake-up channel")
	}
}

// TestDroppedSubscription: the node closes every websocket mid-run while
// blocks keep coming; the source resubscribes and, reading by number, ends
// with exactly the mined blocks, none lost or twice.
func TestDroppedSubscription(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 0, ethnode.Faults{})
	s, _ := openSource(t, Options{Endpoints: []string{n.WebsocketURL()}, StartBlock: m.LastBlock + 1, MaxBlocksPerTrigger: 4}, nil)
	awaitSubscribes(t, s, 1)
	var r rows
	n.Mine(3)
	awaitWake(t, s, "before the drop")
	end, _ := drive(t, s, nil, 4, &r)
	if n.DropWebsockets() == 0 {
		t.Fatal("the node had no websocket to drop")
	}
	n.Mine(6) // while the subscription is down or redialling
	awaitSubscribes(t, s, 2)
	n.Mine(2)
	awaitWake(t, s, "after resubscribing")
	drive(t, s, end, 4, &r)
	checkContiguous(t, n, &r, m.LastBlock+1, m.LastBlock+11)
}

// TestReorgNotifiedAtZeroConfirmations: with confirmations=0 a reorg of the
// head is announced by newHeads; reorg=retract retracts exactly the
// replaced blocks and emits their replacements.
func TestReorgNotifiedAtZeroConfirmations(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 0, ethnode.Faults{})
	d := newRetractDriver(t, n, Options{Endpoints: []string{n.WebsocketURL()}, StartBlock: m.LastBlock + 1,
		Reorg: ReorgRetract, ReorgDepth: 8})
	awaitSubscribes(t, d.src, 1)
	awaitWake(t, d.src, "on subscribing")
	n.Mine(5)
	awaitWake(t, d.src, "after mining")
	for d.step(crashNone) {
	}
	n.Reorg(3)
	awaitWake(t, d.src, "after the reorg")
	if !d.step(crashNone) {
		t.Fatal("the reorg planned no batch")
	}
	if d.retracted != 3 || d.reorgs != 1 || len(d.table) != 5 {
		t.Fatalf("retracted %d in %d reorgs, %d live rows; want 3, 1, 5", d.retracted, d.reorgs, len(d.table))
	}
	d.checkCanonical(m.LastBlock + 1)
}
