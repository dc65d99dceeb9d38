package ui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

//go:embed static
var static embed.FS

// keepAlive is how often an idle event stream gets a comment line, so that
// a dead client is noticed and proxies do not time the stream out.
const keepAlive = 15 * time.Second

// CodeUIAddr is the error code of an address the dashboard cannot listen on.
const CodeUIAddr = "UI_ADDRESS_UNAVAILABLE"

// Server serves a Dashboard over HTTP. Close stops it: every event stream
// gets the final state and an end event, then the listener closes. Safe for
// concurrent use; Close may be called more than once.
type Server struct {
	d      *Dashboard
	srv    *http.Server
	addr   string
	stop   chan struct{}
	done   chan struct{} // the poll loop ended
	sse    sync.WaitGroup
	closed sync.Once
}

// Serve reads the checkpoint once, then listens on addr (host:port; port 0
// picks a free one) and keeps the dashboard current until Close. The
// returned server's URL is where to point a browser.
func Serve(d *Dashboard, addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errcode.Wrap(err, CodeUIAddr, "", "pass a free host:port to --ui-addr, e.g. 127.0.0.1:0 for any free port",
			"cannot serve the dashboard on %s", addr)
	}
	s := &Server{d: d, addr: ln.Addr().String(), stop: make(chan struct{}), done: make(chan struct{})}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServer(http.FS(sub)))
	mux.HandleFunc("GET /api/state", s.handleState)
	mux.HandleFunc("GET /api/events", s.handleEvents)
	mux.HandleFunc("GET /api/batch/{id}", s.handleBatch)
	s.srv = &http.Server{Handler: securityHeaders(mux), ReadHeaderTimeout: 5 * time.Second}
	d.Sync()
	go s.poll()
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the dashboard's address.
func (s *Server) URL() string { return "http://" + s.addr + "/" }

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.addr }

func (s *Server) poll() {
	defer close(s.done)
	t := time.NewTicker(s.d.o.Poll)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.d.poke:
		}
		s.d.Sync()
	}
}

// Close reads the checkpoint a last time, sends every open event stream what
// is new and an end event, and stops the server. It waits at most a few
// seconds for slow clients.
func (s *Server) Close() error {
	var err error
	s.closed.Do(func() {
		close(s.stop)
		<-s.done
		s.d.Sync()
		s.d.mu.Lock()
		s.d.mu.closed = true
		s.d.changedLocked()
		s.d.mu.Unlock()
		waited := make(chan struct{})
		go func() { s.sse.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(3 * time.Second):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if e := s.srv.Shutdown(ctx); e != nil {
			err = errors.Join(fmt.Errorf("stop dashboard server: %w", e), s.srv.Close())
		}
	})
	return err
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Everything is our own: no inline script, no third-party origin.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) handleState(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(s.d.Snapshot())
}

// handleBatch is one batch's whole progress event (doc.go), for the
// per-batch page; 404 for a batch not seen or no longer kept.
func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 0 {
		http.Error(w, "batch id must be a number", http.StatusBadRequest)
		return
	}
	p, ok := s.d.BatchDetail(id)
	if !ok {
		http.Error(w, fmt.Sprintf("batch %d is not among the batches this dashboard keeps", id), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(BatchPage{Kind: p.Kind(), Progress: p})
}

// BatchPage is the answer of GET /api/batch/N.
type BatchPage struct {
	Kind     string          `json:"kind"` // data | no-data | repartition
	Progress stream.Progress `json:"progress"`
}

// handleEvents is the SSE stream (doc.go): a snapshot, then batch and meta
// events as the dashboard changes, and end when the server closes. Each
// stream keeps its own position, so a slow client never holds up the
// others: it gets everything new at once when it catches up.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	s.sse.Add(1)
	defer s.sse.Done()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	d := s.d
	var gen, metaVer, sent int // sent: batches delivered, counted from the history's start
	first := true
	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	for {
		d.mu.Lock()
		var events []sseEvent
		if first || d.mu.gen != gen || sent < d.mu.dropped {
			st := State{Version: APIVersion, Batches: append([]Batch{}, d.mu.batches...)}
			m := d.metaLocked()
			st.Query, st.Sources, st.OffsetLog, st.Demo = m.Query, m.Sources, m.OffsetLog, m.Demo
			events = append(events, sseEvent{"snapshot", st})
		} else {
			for _, b := range d.mu.batches[sent-d.mu.dropped:] {
				events = append(events, sseEvent{"batch", b})
			}
			if d.mu.metaVer != metaVer {
				events = append(events, sseEvent{"meta", d.metaLocked()})
			}
		}
		first = false
		gen, metaVer, sent = d.mu.gen, d.mu.metaVer, d.mu.dropped+len(d.mu.batches)
		closed, wake := d.mu.closed, d.mu.wake
		d.mu.Unlock()
		if closed {
			events = append(events, sseEvent{"end", struct{}{}})
		}
		for _, e := range events {
			if err := e.write(w); err != nil {
				return
			}
		}
		fl.Flush()
		if closed {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

type sseEvent struct {
	name string
	data any
}

func (e sseEvent) write(w http.ResponseWriter) error {
	b, err := json.Marshal(e.data)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, b)
	return err
}
