package ethrpc

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The batches over websocket: as over HTTP (batchhttp.go), a batch's
// answer is read as one message's bytes and decoded by decodeBatch, not by
// go-ethereum's client, whose websocket codec scans every message with
// encoding/json's Decoder, then each message and each result again. The
// batches go over connections of their own, one batch at a time on each:
// the client's connection keeps the other calls. Errors are the
// client's kinds (classify): the transport's, websocket.ErrReadLimit past
// the endpoint's cap, and the context's.

// wsDefaultReadLimit is go-ethereum's client's message limit, kept when no
// maxResponseSize is set.
const wsDefaultReadLimit = 32 * 1024 * 1024

// wsBatcher posts batches to one websocket endpoint, one batch at a time
// on each of its connections: an answer is the connection's next message.
// Concurrent batches (the source's parallelism) each take an idle
// connection or dial one, as go-ethereum's client sends them concurrently.
type wsBatcher struct {
	url    string
	limit  int64
	mu     sync.Mutex
	idle   []*websocket.Conn
	closed bool // close was called: a connection in use is not kept
}

// maxIdleWS bounds the idle connections kept (parallelism's default).
const maxIdleWS = 4

// post sends the batch request body and returns the answer's bytes. A
// failed exchange closes its connection.
func (w *wsBatcher) post(ctx context.Context, body []byte) ([]byte, error) {
	var c *websocket.Conn
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		c, w.idle = w.idle[n-1], w.idle[:n-1]
	}
	w.mu.Unlock()
	if c == nil {
		var err error
		if c, err = dialBatchWS(ctx, w.url, w.limit); err != nil {
			return nil, err
		}
	}
	dl, _ := ctx.Deadline()
	_ = c.SetWriteDeadline(dl)
	_ = c.SetReadDeadline(dl)
	// A cancel unblocks the read: its deadline becomes now.
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Now()) })
	data, err := exchange(c, body)
	if !stop() || err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), err)
		}
		return nil, err
	}
	w.mu.Lock()
	if !w.closed && len(w.idle) < maxIdleWS {
		w.idle, c = append(w.idle, c), nil
	}
	w.mu.Unlock()
	if c != nil {
		c.Close()
	}
	return data, nil
}

func exchange(c *websocket.Conn, body []byte) ([]byte, error) {
	if err := c.WriteMessage(websocket.TextMessage, body); err != nil {
		return nil, err
	}
	_, data, err := c.ReadMessage()
	return data, err
}

// dialBatchWS dials rawURL as go-ethereum's client does (credentials in the
// URL become basic authentication) with read limit limit (0: the client's
// default).
func dialBatchWS(ctx context.Context, rawURL string, limit int64) (*websocket.Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if u.User != nil {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.User.String())))
		u.User = nil
	}
	d := websocket.Dialer{ReadBufferSize: 1024, WriteBufferSize: 1024, Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 45 * time.Second}
	c, resp, err := d.DialContext(ctx, u.String(), h)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = wsDefaultReadLimit
	}
	c.SetReadLimit(limit)
	return c, nil
}

// dropIdle closes the idle connections (after a failed call: they may be
// as stale as the one that failed); close also keeps none from then on.
func (w *wsBatcher) dropIdle(final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.idle {
		c.Close()
	}
	w.idle = nil
	w.closed = w.closed || final
}

// close closes the idle connections and keeps none from then on; one in
// use is closed by its post.
func (w *wsBatcher) close() { w.dropIdle(true) }
