package ethnode

import (
	"context"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
)

// TestNewHeadsSubscription: over the node's websocket, eth_subscribe
// ("newHeads") sends every mined head, and a reorg sends its new head only;
// each block's announcement time is recorded, the replacements' included;
// DropWebsockets ends the subscription with an error.
func TestNewHeadsSubscription(t *testing.T) {
	n := startTestNode(t, Options{Manual: true})
	ctx := context.Background()
	c, err := ethclient.DialContext(ctx, n.WebsocketURL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch := make(chan *types.Header, 16)
	sub, err := c.SubscribeNewHead(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	next := func() *types.Header {
		t.Helper()
		select {
		case h := <-ch:
			return h
		case err := <-sub.Err():
			t.Fatalf("subscription ended: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("no notification")
		}
		return nil
	}
	before := time.Now()
	n.Mine(3)
	for i := uint64(0); i < 3; i++ {
		h := next()
		if want := n.Header(n.base + i); h.Hash() != want.Hash() {
			t.Fatalf("notification %d: block %d %s, want %s", i, h.Number, h.Hash(), want.Hash())
		}
		if at, ok := n.AnnouncedAt(h.Hash()); !ok || at.Before(before) {
			t.Fatalf("block %d announced at %v (%v)", h.Number, at, ok)
		}
	}
	n.Reorg(2)
	if h := next(); h.Hash() != n.Header(n.Head()).Hash() {
		t.Fatalf("reorg notified %d %s, want the new head %s", h.Number, h.Hash(), n.Header(n.Head()).Hash())
	}
	if _, ok := n.AnnouncedAt(n.Header(n.Head() - 1).Hash()); !ok {
		t.Fatal("the reorg's lower replacement has no announcement time")
	}
	select {
	case h := <-ch:
		t.Fatalf("a reorg of depth 2 sent a second notification: block %d", h.Number)
	case <-time.After(50 * time.Millisecond):
	}
	if n.Subscribers() != 1 {
		t.Fatalf("%d subscribers, want 1", n.Subscribers())
	}
	if n.DropWebsockets() == 0 {
		t.Fatal("no websocket to drop")
	}
	select {
	case <-sub.Err():
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription outlived its connection")
	}
}
