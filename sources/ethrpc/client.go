package ethrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
	"github.com/gorilla/websocket"
)

// Backoff and rate-control constants. The rate limiter is off until the
// first throttle: a healthy endpoint (the embedded node) is never slowed.
const (
	backoffBase      = 100 * time.Millisecond
	backoffMax       = 10 * time.Second
	retryAfterMax    = 60 * time.Second
	throttleRate     = 10.0 // req/s after the first 429
	minRate          = 0.5  // req/s floor of the multiplicative decrease
	rateStep         = 1.0  // req/s added per success (additive increase)
	unlimitedAbove   = 50.0 // req/s at which the limiter switches off again
	latencyWindowLen = 512
)

// errBatchTooLarge means the endpoint refused a batch for its size; the
// caller splits it rather than retrying it unchanged.
var errBatchTooLarge = errors.New("endpoint refused the batch size")

// pool calls JSON-RPC endpoints with per-request timeouts, retries with
// exponential backoff and jitter, Retry-After, an AIMD request rate and
// failover. It is safe for concurrent use; the source calls it from one
// goroutine, Metrics from another.
type pool struct {
	eps        []*endpoint
	clock      stream.Clock
	timeout    time.Duration
	maxRetries int
	log        *slog.Logger

	mu struct {
		sync.Mutex
		cur       int // endpoint in use
		rng       *rand.Rand
		rate      float64 // req/s; 0 = unlimited
		next      time.Time
		requests  int64
		retries   int64
		throttles int64
		failovers int64
		splits    int64
		lat       []time.Duration // ring of recent latencies
		latPos    int
		latMax    time.Duration
	}
}

type endpoint struct {
	url         string
	maxResponse int64 // bytes of one answer; 0 = no cap
	mu          sync.Mutex
	c           *rpc.Client
	hc          *http.Client // c's HTTP client; nil for websocket
	ws          *wsBatcher   // the batches' connection; nil for HTTP
}

// retryAfterKey carries a *callSlot through the request context to the
// RoundTripper: go-ethereum's rpc.HTTPError keeps status and body but drops
// the response headers, and a capped body's error reaches the caller only
// as the JSON decoder's.
type retryAfterKey struct{}

// callSlot is what the transport tells the call about its answer.
type callSlot struct {
	v        string // Retry-After of an error answer
	tooLarge bool   // the answer exceeded the endpoint's cap
}

// captureTransport records Retry-After and caps every answer's body at max
// bytes (0: no cap): an answer announcing more is refused unread, one
// streaming more is cut off at the cap.
type captureTransport struct {
	base http.RoundTripper
	max  int64
}

// errResponseTooLarge ends a capped answer's body.
var errResponseTooLarge = errors.New("JSON-RPC answer exceeds maxResponseSize")

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	slot, _ := req.Context().Value(retryAfterKey{}).(*callSlot)
	if resp.StatusCode >= 400 && slot != nil {
		slot.v = resp.Header.Get("Retry-After")
	}
	if t.max > 0 {
		if resp.ContentLength > t.max {
			resp.Body.Close()
			if slot != nil {
				slot.tooLarge = true
			}
			return nil, fmt.Errorf("%w (Content-Length %d)", errResponseTooLarge, resp.ContentLength)
		}
		resp.Body = &cappedBody{rc: resp.Body, left: t.max, slot: slot}
	}
	return resp, err
}

// cappedBody reads at most left bytes of rc, then fails (and marks slot);
// the rest is never read: Close drops the connection.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
	slot *callSlot
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte past the cap proves the answer is larger.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		if b.slot != nil {
			b.slot.tooLarge = true
		}
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

func newPool(urls []string, clock stream.Clock, timeout time.Duration, maxRetries int, maxResponse int64, log *slog.Logger) *pool {
	p := &pool{clock: clock, timeout: timeout, maxRetries: maxRetries, log: log}
	for _, u := range urls {
		p.eps = append(p.eps, &endpoint{url: u, maxResponse: maxResponse})
	}
	p.mu.rng = rand.New(rand.NewPCG(uint64(clock.Now().UnixNano()), 0x657468727063))
	p.mu.lat = make([]time.Duration, 0, latencyWindowLen)
	return p
}

func (e *endpoint) client(ctx context.Context) (*rpc.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c != nil {
		return e.c, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	hc := &http.Client{Transport: captureTransport{base: tr, max: e.maxResponse}}
	opts := []rpc.ClientOption{rpc.WithHTTPClient(hc)}
	if e.maxResponse > 0 {
		// Over ws the cap is the websocket's message limit (go-ethereum's
		// default is 32 MiB): a larger message ends the read with
		// websocket.ErrReadLimit, reported as over http.
		opts = append(opts, rpc.WithWebsocketMessageSizeLimit(e.maxResponse))
	}
	c, err := rpc.DialOptions(ctx, e.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", redact(e.url), err)
	}
	e.c = c
	if strings.HasPrefix(e.url, "http") {
		e.hc = hc
	} else if e.ws == nil {
		e.ws = &wsBatcher{url: e.url, limit: e.maxResponse}
	}
	return c, nil
}

// batchPoster is the function that posts a batch request to the endpoint
// whose rpc client is c and returns the answer's bytes (batchhttp.go,
// batchws.go); nil for none (a client not of this pool).
func (p *pool) batchPoster(c *rpc.Client) func(ctx context.Context, body []byte) ([]byte, error) {
	if hc, url := p.httpFor(c); hc != nil {
		return func(ctx context.Context, body []byte) ([]byte, error) { return postBatch(ctx, hc, url, body) }
	}
	for _, e := range p.eps {
		e.mu.Lock()
		ws, mine := e.ws, e.c == c
		e.mu.Unlock()
		if mine && ws != nil {
			return ws.post
		}
	}
	return nil
}

// httpFor is the HTTP client and URL of the endpoint whose rpc client is c,
// nil for a websocket one.
func (p *pool) httpFor(c *rpc.Client) (*http.Client, string) {
	for _, e := range p.eps {
		e.mu.Lock()
		hc, mine := e.hc, e.c == c
		e.mu.Unlock()
		if mine {
			return hc, e.url
		}
	}
	return nil, ""
}

func (e *endpoint) drop(c *rpc.Client) {
	// A websocket connection that failed is redialled on next use; for HTTP
	// the client is stateless and kept.
	if c != nil && strings.HasPrefix(e.url, "ws") {
		e.mu.Lock()
		if e.c == c {
			e.c.Close()
			e.c = nil
		}
		ws := e.ws
		e.mu.Unlock()
		if ws != nil {
			ws.dropIdle(false)
		}
	}
}

func (p *pool) close() {
	for _, e := range p.eps {
		e.mu.Lock()
		if e.c != nil {
			e.c.Close()
			e.c = nil
		}
		ws := e.ws
		e.mu.Unlock()
		if ws != nil {
			ws.close()
		}
	}
}

type errClass int

const (
	classFatal errClass = iota
	classRetry
	classThrottle
	classTooLarge
)

// classify decides what a failed call means. Only failures where retrying can
// help are retried: the calls are reads, so repeating one is always safe.
func classify(err error) errClass {
	if errors.Is(err, errBatchTooLarge) {
		return classTooLarge
	}
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return classFatal // our own verdict on the data, e.g. a malformed block
	}
	if errors.Is(err, errBlockNotFound) || errors.Is(err, context.DeadlineExceeded) {
		return classRetry
	}
	var he rpc.HTTPError
	if errors.As(err, &he) {
		switch {
		case he.StatusCode == http.StatusTooManyRequests:
			return classThrottle
		case he.StatusCode == http.StatusRequestEntityTooLarge:
			return classTooLarge
		case he.StatusCode >= 500, he.StatusCode == http.StatusRequestTimeout:
			return classRetry
		}
		return classFatal
	}
	var re rpc.Error
	if errors.As(err, &re) {
		msg := strings.ToLower(re.Error())
		switch {
		case re.ErrorCode() == -32005, re.ErrorCode() == 429,
			strings.Contains(msg, "rate limit"), strings.Contains(msg, "too many requests"):
			return classThrottle
		case strings.Contains(msg, "batch too large"), strings.Contains(msg, "response too large"),
			strings.Contains(msg, "batch size"):
			return classTooLarge
		case strings.Contains(msg, "header not found"), strings.Contains(msg, "timeout"):
			return classRetry
		}
		return classFatal
	}
	var ne net.Error
	var se *json.SyntaxError
	switch {
	case errors.As(err, &ne), errors.As(err, &se), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, rpc.ErrClientQuit):
		return classRetry
	}
	// Anything else that is not a JSON-RPC error object comes from the
	// transport (dial failures, proxies answering HTML): retry, bounded.
	return classRetry
}

// call runs fn against the current endpoint until it succeeds, fails fatally,
// or the retry budget is spent. what names the call in errors and logs.
func (p *pool) call(ctx context.Context, what string, fn func(ctx context.Context, c *rpc.Client) error) error {
	for attempt := 0; ; attempt++ {
		if err := p.waitRate(ctx); err != nil {
			return batchDeadlineErr(ctx, what, p.eps[0].url, err)
		}
		p.mu.Lock()
		ep := p.eps[p.mu.cur]
		p.mu.requests++
		p.mu.Unlock()

		slot := &callSlot{}
		c, err := ep.client(ctx)
		if err == nil {
			actx, cancel := context.WithTimeout(context.WithValue(ctx, retryAfterKey{}, slot), p.timeout)
			t0 := time.Now()
			err = fn(actx, c)
			cancel()
			p.observe(time.Since(t0))
		}
		if err == nil {
			p.onSuccess()
			return nil
		}
		if ctx.Err() != nil {
			return batchDeadlineErr(ctx, what, ep.url, err)
		}
		if slot.tooLarge || errors.Is(err, errResponseTooLarge) || errors.Is(err, websocket.ErrReadLimit) {
			return errcode.New(CodeResponseTooLarge, "",
				"check that the endpoint serves Ethereum JSON-RPC (a block header batch is a few KiB per block), or raise maxResponseSize=, or lower maxBatchSize=",
				"%s at %s answered more than maxResponseSize (%d bytes); the answer was read no further", what, redact(ep.url), ep.maxResponse)
		}
		class := classify(err)
		switch class {
		case classFatal:
			var ce *errcode.Error
			if errors.As(err, &ce) {
				return err
			}
			return errcode.Wrap(err, CodeRPCRequestFailed, "",
				"check the endpoint URL and API key, and that the endpoint serves Ethereum JSON-RPC (eth_blockNumber, eth_getBlockByNumber)",
				"%s at %s", what, redact(ep.url))
		case classTooLarge:
			return fmt.Errorf("%s at %s: %w: %w", what, redact(ep.url), errBatchTooLarge, err)
		}
		if class == classThrottle {
			p.onThrottle()
		}
		if attempt >= p.maxRetries {
			return errcode.Wrap(err, CodeRPCUnavailable, "",
				"check the endpoints, add another with endpoints=, or raise maxRetries",
				"%s failed after %d attempts (last at %s)", what, attempt+1, redact(ep.url))
		}
		ep.drop(c)
		wait := p.backoff(attempt, slot.v)
		p.mu.Lock()
		p.mu.retries++
		n := len(p.eps)
		if n > 1 {
			// Fail over: another provider may be healthy or have quota. The
			// first pass over the endpoints does not sleep.
			p.mu.cur = (p.mu.cur + 1) % n
			p.mu.failovers++
			if (attempt+1)%n != 0 {
				wait = 0
			}
		}
		p.mu.Unlock()
		p.log.Warn("ethrpc call failed, retrying", "call", what, "endpoint", redact(ep.url),
			"attempt", attempt+1, "wait", wait, "err", err)
		if wait > 0 {
			if err := p.clock.Sleep(ctx, wait); err != nil {
				return batchDeadlineErr(ctx, what, ep.url, err)
			}
		}
	}
}

// backoff is exponential with jitter in [d/2, d], or the server's Retry-After
// if that is longer.
func (p *pool) backoff(attempt int, retryAfter string) time.Duration {
	d := backoffBase << min(attempt, 10)
	d = min(d, backoffMax)
	p.mu.Lock()
	d = d/2 + time.Duration(p.mu.rng.Int64N(int64(d/2)+1))
	p.mu.Unlock()
	if ra := parseRetryAfter(retryAfter, p.clock.Now()); ra > d {
		d = ra
	}
	return d
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 §10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return max(0, min(d, retryAfterMax))
}

// waitRate spaces requests by 1/rate while the AIMD limiter is on.
func (p *pool) waitRate(ctx context.Context) error {
	p.mu.Lock()
	if p.mu.rate == 0 {
		p.mu.Unlock()
		return nil
	}
	now := p.clock.Now()
	at := p.mu.next
	if at.Before(now) {
		at = now
	}
	p.mu.next = at.Add(time.Duration(float64(time.Second) / p.mu.rate))
	p.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		return p.clock.Sleep(ctx, d)
	}
	return nil
}

func (p *pool) onThrottle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.throttles++
	if p.mu.rate == 0 {
		p.mu.rate = throttleRate
	} else {
		p.mu.rate = max(p.mu.rate/2, minRate)
	}
}

func (p *pool) onSuccess() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.rate > 0 {
		p.mu.rate += rateStep
		if p.mu.rate >= unlimitedAbove {
			p.mu.rate = 0
		}
	}
}

func (p *pool) observe(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.mu.lat) < latencyWindowLen {
		p.mu.lat = append(p.mu.lat, d)
	} else {
		p.mu.lat[p.mu.latPos] = d
		p.mu.latPos = (p.mu.latPos + 1) % latencyWindowLen
	}
	p.mu.latMax = max(p.mu.latMax, d)
}

func (p *pool) noteSplit() {
	p.mu.Lock()
	p.mu.splits++
	p.mu.Unlock()
}

// metrics renders the counters for the progress event.
func (p *pool) metrics() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	lat := slices.Clone(p.mu.lat)
	slices.Sort(lat)
	var p50 time.Duration
	if len(lat) > 0 {
		p50 = lat[len(lat)/2]
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	rate := "unlimited"
	if p.mu.rate > 0 {
		rate = strconv.FormatFloat(p.mu.rate, 'f', 1, 64)
	}
	return map[string]string{
		"requests":       strconv.FormatInt(p.mu.requests, 10),
		"retries":        strconv.FormatInt(p.mu.retries, 10),
		"throttles":      strconv.FormatInt(p.mu.throttles, 10),
		"failovers":      strconv.FormatInt(p.mu.failovers, 10),
		"batchSplits":    strconv.FormatInt(p.mu.splits, 10),
		"latencyP50Ms":   ms(p50),
		"latencyMaxMs":   ms(p.mu.latMax),
		"requestRate":    rate,
		"activeEndpoint": redact(p.eps[p.mu.cur].url),
	}
}
