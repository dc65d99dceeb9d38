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
// batches go over a connection of their own, one batch at a time: the
// client's connection keeps the newHeads subscription. Errors are the
// client's kinds (classify): the transport's, websocket.ErrReadLimit past
// the endpoint's cap, and the context's.

// wsDefaultReadLimit is go-ethereum's client's message limit, kept when no
// maxResponseSize is set.
const wsDefaultReadLimit = 32 * 1024 * 1024

// wsBatcher posts batches to one websocket endpoint.
type wsBatcher struct {
	url   string
	limit int64
	mu    sync.Mutex // one batch in flight: an answer is the next message
	conn  *websocket.Conn
}

// post sends the batch request body and returns the answer's bytes. A
// failed exchange closes the connection; the next post redials.
func (w *wsBatcher) post(ctx context.Context, body []byte) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		c, err := dialBatchWS(ctx, w.url, w.limit)
		if err != nil {
			return nil, err
		}
		w.conn = c
	}
	c := w.conn
	dl, _ := ctx.Deadline()
	_ = c.SetWriteDeadline(dl)
	_ = c.SetReadDeadline(dl)
	// A cancel unblocks the read: its deadline becomes now.
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Now()) })
	data, err := exchange(c, body)
	if !stop() || err != nil {
		c.Close()
		w.conn = nil
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), err)
		}
		return nil, err
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

// close drops the connection.
func (w *wsBatcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}
