package ethrpc

import (
	"context"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/stream"
)

// Subscription modes (Options.Subscribe).
const (
	// SubscribeAuto follows newHeads over the first ws:// or wss://
	// endpoint, and polls when there is none (the default).
	SubscribeAuto = "auto"
	// SubscribeOff never subscribes: the source only polls.
	SubscribeOff = "off"
)

// Resubscription backoff: a dropped subscription is redialled after
// subBackoffBase, doubling to subBackoffMax, on the source's clock.
const (
	subBackoffBase = 100 * time.Millisecond
	subBackoffMax  = 5 * time.Second
)

// headWatch follows eth_subscribe("newHeads") on one websocket endpoint
// and turns each notification into a wake-up (stream.DataNotifier). A
// notification is only a hint that a newer head is readable: the source
// still asks for the head and reads blocks by number, with every reorg
// check, so a lost, duplicated or reordered notification can delay a batch
// but never loses or double-counts a block. A dropped subscription is
// redialled with bounded backoff; each successful (re)subscription wakes the
// engine once, since heads may have arrived while it was down.
type headWatch struct {
	url   string
	clock stream.Clock
	log   *slog.Logger
	note  func(num uint64, t time.Time) // the arrival of a notified head
	ready chan struct{}                 // capacity 1: wake-ups coalesce
	stop  context.CancelFunc
	done  chan struct{}

	mu struct {
		sync.Mutex
		up            bool
		subscribes    int64 // successful subscriptions, the first included
		notifications int64
		head          uint64 // number of the newest notified head
	}
}

// wsEndpoint is the first ws:// or wss:// endpoint, "" if none.
func wsEndpoint(eps []string) string {
	for _, e := range eps {
		if u, err := url.Parse(e); err == nil && (u.Scheme == "ws" || u.Scheme == "wss") {
			return e
		}
	}
	return ""
}

func startHeadWatch(endpoint string, clock stream.Clock, log *slog.Logger, note func(uint64, time.Time)) *headWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &headWatch{url: endpoint, clock: clock, log: log, note: note, ready: make(chan struct{}, 1), stop: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// run subscribes until stopped, redialling after each failure.
func (w *headWatch) run(ctx context.Context) {
	defer close(w.done)
	backoff := subBackoffBase
	for ctx.Err() == nil {
		ok := w.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if ok {
			backoff = subBackoffBase // it worked for a while: retry soon
		}
		w.log.Info("ethrpc newHeads subscription down, redialling", "endpoint", redact(w.url), "in", backoff)
		if w.clock.Sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, subBackoffMax)
	}
}

// notifiedHead is the part of a newHeads notification the source reads.
type notifiedHead struct {
	Number hexutil.Uint64 `json:"number"`
}

// follow dials, subscribes and relays notifications until the
// subscription fails; ok is whether it subscribed at all.
func (w *headWatch) follow(ctx context.Context) (ok bool) {
	dctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	c, err := rpc.DialContext(dctx, w.url)
	if err != nil {
		cancel()
		w.log.Debug("ethrpc newHeads dial failed", "endpoint", redact(w.url), "err", err)
		return false
	}
	defer c.Close()
	ch := make(chan notifiedHead, 64)
	sub, err := c.EthSubscribe(dctx, ch, "newHeads")
	cancel()
	if err != nil {
		w.log.Debug("ethrpc newHeads subscribe failed", "endpoint", redact(w.url), "err", err)
		return false
	}
	defer sub.Unsubscribe()
	w.mu.Lock()
	w.mu.up = true
	w.mu.subscribes++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.mu.up = false
		w.mu.Unlock()
	}()
	w.wake() // heads may have come while unsubscribed
	for {
		select {
		case h := <-ch:
			now := w.clock.Now()
			w.mu.Lock()
			w.mu.notifications++
			w.mu.head = uint64(h.Number)
			w.mu.Unlock()
			w.note(uint64(h.Number), now)
			w.wake()
		case err := <-sub.Err():
			w.log.Debug("ethrpc newHeads subscription ended", "endpoint", redact(w.url), "err", err)
			return true
		case <-ctx.Done():
			return true
		}
	}
}

func (w *headWatch) wake() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

func (w *headWatch) close() {
	w.stop()
	<-w.done
}

// metrics adds the subscription's figures to a source's metrics.
func (w *headWatch) metrics(m map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m["subscription"] = "down"
	if w.mu.up {
		m["subscription"] = "up"
	}
	m["subscribes"] = strconv.FormatInt(w.mu.subscribes, 10)
	m["headNotifications"] = strconv.FormatInt(w.mu.notifications, 10)
	if w.mu.notifications > 0 {
		m["notifiedHead"] = strconv.FormatUint(w.mu.head, 10)
	}
}

// DataReady wakes trigger realTime when a newHeads notification arrives;
// nil when the source polls (no ws endpoint, or subscribe=off).
func (s *Source) DataReady() <-chan struct{} {
	if s.watch == nil {
		return nil
	}
	return s.watch.ready
}

// Subscribed reports whether the newHeads subscription is up now.
func (s *Source) Subscribed() bool {
	if s.watch == nil {
		return false
	}
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	return s.watch.mu.up
}
