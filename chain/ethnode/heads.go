package ethnode

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
)

// heads publishes eth_subscribe("newHeads") notifications and records when
// the node announced each block, the origin of a freshness measurement (the
// commit time of the Delta version holding a block minus this time).
//
// A block is announced when it becomes canonical: when it is mined, or when
// a reorg makes it part of the chain. Like geth, a subscriber is sent the
// header of the new head only; a reorg's lower replacement blocks are
// announced (timed) but not sent. A subscriber that does not keep up loses
// notifications rather than slowing the miner: a notification only says "a
// newer head is readable", which any later one says too.
type heads struct {
	mu        sync.Mutex
	subs      map[rpc.ID]chan *types.Header
	announced map[common.Hash]time.Time
	order     []common.Hash // FIFO of announced, bounded by maxAnnounced
	conns     map[net.Conn]struct{}
}

// maxAnnounced bounds the announcement times kept: a long run measuring
// freshness reads each block's time within seconds of its announcement.
const maxAnnounced = 1 << 16

// subBuffer is each subscriber's queue of unsent heads.
const subBuffer = 256

// announce records b's announcement time and, if notify, sends its header
// to every subscriber. Called with the node's mu held, so the announcements
// are in chain order.
func (h *heads) announce(b *nodeBlock, notify bool, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.announced == nil {
		h.announced = make(map[common.Hash]time.Time)
	}
	if _, ok := h.announced[b.hash]; !ok {
		if len(h.order) >= maxAnnounced {
			delete(h.announced, h.order[0])
			h.order = h.order[1:]
		}
		h.order = append(h.order, b.hash)
	}
	h.announced[b.hash] = now
	if !notify {
		return
	}
	for _, ch := range h.subs {
		select {
		case ch <- b.header:
		default: // a slow subscriber: see the type's comment
		}
	}
}

func (h *heads) subscribe(id rpc.ID) chan *types.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = make(map[rpc.ID]chan *types.Header)
	}
	ch := make(chan *types.Header, subBuffer)
	h.subs[id] = ch
	return ch
}

func (h *heads) unsubscribe(id rpc.ID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, id)
}

// trackConn is the server's ConnState hook: it keeps the hijacked
// (websocket) connections, which http.Server.Close does not close, so that
// DropWebsockets can.
func (h *heads) trackConn(c net.Conn, s http.ConnState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns == nil {
		h.conns = make(map[net.Conn]struct{})
	}
	switch s {
	case http.StateHijacked:
		h.conns[c] = struct{}{}
	case http.StateClosed:
		delete(h.conns, c)
	}
}

// AnnouncedAt is when the node announced the block with hash (mined it, or
// made it canonical by a reorg); false if it never did or the time was
// forgotten (only the last 65,536 announcements are kept).
func (n *Node) AnnouncedAt(hash common.Hash) (time.Time, bool) {
	n.heads.mu.Lock()
	defer n.heads.mu.Unlock()
	t, ok := n.heads.announced[hash]
	return t, ok
}

// Subscribers is the number of live newHeads subscriptions.
func (n *Node) Subscribers() int {
	n.heads.mu.Lock()
	defer n.heads.mu.Unlock()
	return len(n.heads.subs)
}

// DropWebsockets closes every websocket connection, as a restarting node or
// a load balancer does: each client's subscription ends with an error. The
// server keeps accepting new connections.
func (n *Node) DropWebsockets() int {
	n.heads.mu.Lock()
	conns := make([]net.Conn, 0, len(n.heads.conns))
	for c := range n.heads.conns {
		conns = append(conns, c)
	}
	n.heads.conns = nil
	n.heads.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return len(conns)
}

// NewHeads is eth_subscribe("newHeads"): the header of every new head, as
// go-ethereum sends it (its JSON, "hash" included).
func (api *ethAPI) NewHeads(ctx context.Context) (*rpc.Subscription, error) {
	notifier, ok := rpc.NotifierFromContext(ctx)
	if !ok {
		return &rpc.Subscription{}, rpc.ErrNotificationsUnsupported
	}
	n := api.n
	sub := notifier.CreateSubscription()
	ch := n.heads.subscribe(sub.ID)
	go func() {
		defer n.heads.unsubscribe(sub.ID)
		for {
			select {
			case h := <-ch:
				if err := notifier.Notify(sub.ID, h); err != nil {
					return
				}
			case <-sub.Err():
				return
			case <-n.stop:
				return
			}
		}
	}()
	return sub, nil
}

// WebsocketURL is the websocket endpoint, "ws://127.0.0.1:PORT", where
// eth_subscribe("newHeads") is served.
func (n *Node) WebsocketURL() string { return "ws" + strings.TrimPrefix(n.url, "http") }
