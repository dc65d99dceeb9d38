package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
)

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// The page, its script and the state are served from the binary over real
// HTTP; /api/state is the dashboard's snapshot.
func TestServeStateAndPage(t *testing.T) {
	fs := newFS(t)
	writeCheckpoint(t, fs)
	appendRaw(t, fs, filepath.Join(ckpt, checkpoint.ProgressFile),
		append(line(t, event(0, "r", map[string]int64{"s3_backfill": 9}, 200)), line(t, event(1, "r", map[string]int64{"eth_live": 2}, 8))...))
	d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeRun, Trigger: "once"})
	s, err := Serve(d, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, body := get(t, s.URL()+"api/state")
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var st State
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(d.Snapshot())
	got, _ := json.Marshal(st)
	if string(got) != string(want) {
		t.Errorf("api/state differs from the snapshot:\n%s\n%s", got, want)
	}
	if st.Version != APIVersion || len(st.Batches) != 2 || st.Query.Trigger != "once" || len(st.OffsetLog.Entries) != 4 {
		t.Errorf("state v%d, %d batches, trigger %q, %d log entries", st.Version, len(st.Batches), st.Query.Trigger, len(st.OffsetLog.Entries))
	}
	resp, body = get(t, s.URL())
	if !strings.Contains(string(body), `<script src="app.js"`) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("page: %s, CSP %q", body[:min(len(body), 200)], resp.Header.Get("Content-Security-Policy"))
	}
	for _, f := range []string{"app.js", "app.css"} {
		resp, body = get(t, s.URL()+f)
		if resp.StatusCode != 200 || len(body) < 1000 {
			t.Errorf("%s: %d, %d bytes", f, resp.StatusCode, len(body))
		}
	}
	// The per-batch page's data: the whole progress event of the batch.
	resp, body = get(t, s.URL()+"api/batch/1")
	var page BatchPage
	if err := json.Unmarshal(body, &page); err != nil || resp.StatusCode != 200 {
		t.Fatalf("api/batch/1: %d %v\n%s", resp.StatusCode, err, body)
	}
	wantEv := event(1, "r", map[string]int64{"eth_live": 2}, 8)
	gotJ, _ := json.Marshal(page.Progress)
	wantJ, _ := json.Marshal(wantEv)
	if string(gotJ) != string(wantJ) || page.Kind != wantEv.Kind() {
		t.Errorf("api/batch/1 = %s (%s), want the event %s (%s)", gotJ, page.Kind, wantJ, wantEv.Kind())
	}
	if resp, _ := get(t, s.URL()+"api/batch/7"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("api/batch/7 (never seen): %d", resp.StatusCode)
	}
	if resp, _ := get(t, s.URL()+"api/batch/x"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("api/batch/x: %d", resp.StatusCode)
	}
}

// The per-batch detail keeps the newest maxDetail batches, a re-run batch
// as last reported.
func TestBatchDetailBounded(t *testing.T) {
	d := New(Options{Checkpoint: ckpt, FS: newFS(t), Mode: ModeRun})
	d.mu.Lock()
	for id := int64(0); id < maxDetail+5; id++ {
		d.keepDetailLocked(event(id, "r", map[string]int64{"eth_live": 1}, 8))
	}
	d.keepDetailLocked(event(maxDetail+4, "r2", map[string]int64{"eth_live": 1}, 8))
	n := len(d.mu.detail)
	d.mu.Unlock()
	if n != maxDetail {
		t.Errorf("%d batches kept, want %d", n, maxDetail)
	}
	if _, ok := d.BatchDetail(4); ok {
		t.Error("batch 4 kept beyond the bound")
	}
	if p, ok := d.BatchDetail(maxDetail + 4); !ok || p.RunID != "r2" {
		t.Errorf("the re-run batch: %v %+v", ok, p.RunID)
	}
}

type sse struct {
	name string
	data string
}

// readEvents parses a server-sent event stream into ch until it ends.
func readEvents(r io.Reader, ch chan<- sse) {
	defer close(ch)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var ev sse
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "event: "):
			ev.name = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: "):
			ev.data = strings.TrimPrefix(l, "data: ")
		case l == "" && ev.name != "":
			ch <- ev
			ev = sse{}
		}
	}
}

func next(t *testing.T, ch <-chan sse, skipMeta bool) sse {
	t.Helper()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("event stream closed")
			}
			if skipMeta && ev.name == "meta" {
				continue
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
		}
	}
}

// The event stream: a snapshot first, then each new batch once, in order,
// meta when the header changes, and end when the server closes; a client
// that connects late gets everything in its snapshot.
func TestEventStream(t *testing.T) {
	fs := newFS(t)
	path := filepath.Join(ckpt, checkpoint.ProgressFile)
	appendRaw(t, fs, path, line(t, event(0, "r", map[string]int64{"eth_live": 2}, 8)))
	d := New(Options{Checkpoint: ckpt, FS: fs, Mode: ModeRun, Poll: time.Hour}) // only pokes read
	s, err := Serve(d, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	req, _ := http.NewRequestWithContext(context.Background(), "GET", s.URL()+"api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	ch := make(chan sse, 100)
	go readEvents(resp.Body, ch)

	ev := next(t, ch, false)
	var snap State
	if ev.name != "snapshot" || json.Unmarshal([]byte(ev.data), &snap) != nil || len(snap.Batches) != 1 {
		t.Fatalf("first event %s %.200s", ev.name, ev.data)
	}
	d.Started("processing-time=1s")
	ev = next(t, ch, false)
	var meta Meta
	if ev.name != "meta" || json.Unmarshal([]byte(ev.data), &meta) != nil || meta.Query.Status.State != StatusActive || meta.Query.Trigger != "processing-time=1s" {
		t.Fatalf("after Started: %s %.300s", ev.name, ev.data)
	}
	for id := int64(1); id <= 3; id++ {
		p := event(id, "r", map[string]int64{"eth_live": 2}, 8)
		appendRaw(t, fs, path, line(t, p))
		d.OnProgress(p) // as the engine calls its listeners
		ev = next(t, ch, true)
		var b Batch
		if ev.name != "batch" || json.Unmarshal([]byte(ev.data), &b) != nil || b.BatchID != id {
			t.Fatalf("after batch %d: %s %.200s", id, ev.name, ev.data)
		}
	}
	// A late client gets the four batches in its snapshot.
	_, body := get(t, s.URL()+"api/state")
	var late State
	json.Unmarshal(body, &late)
	if len(late.Batches) != 4 {
		t.Fatalf("late state has %d batches", len(late.Batches))
	}

	d.Finished(errcode.New(errcode.CheckpointLocked, ckpt, "", "locked"))
	for meta.Query.Status.State != StatusFailed { // metas sent before Finished may come first
		ev = next(t, ch, false)
		if ev.name != "meta" || json.Unmarshal([]byte(ev.data), &meta) != nil {
			t.Fatalf("after a failed run: %s %.300s", ev.name, ev.data)
		}
	}
	if meta.Query.Status.Code != errcode.CheckpointLocked {
		t.Fatalf("failed status %+v", meta.Query.Status)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if ev := next(t, ch, true); ev.name != "end" {
		t.Fatalf("last event %s", ev.name)
	}
	if _, ok := <-ch; ok {
		t.Fatal("stream still open after end")
	}
	if _, err := http.Get(s.URL() + "api/state"); err == nil {
		t.Fatal("server still answers after Close")
	}
}

// A busy address is refused with a code and a remedy.
func TestServeAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Serve(New(Options{Checkpoint: ckpt, FS: newFS(t)}), ln.Addr().String())
	if errcode.Code(err) != CodeUIAddr {
		t.Fatalf("err %v, want %s", err, CodeUIAddr)
	}
}
