package s3serve

import (
	"bytes"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sdkGet is a GET as the archive source's getter sends it (rangeconn.go:
// the SDK's signed headers, here unsigned).
func sdkGet(target, rng string) string {
	r := "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Accept-Encoding: identity\r\nAmz-Sdk-Invocation-Id: 0e6c1b9a-2f61-4a2e-9f0f-3f4b5f0b7c11\r\n" +
		"Amz-Sdk-Request: attempt=1; max=3\r\nX-Amz-Content-Sha256: UNSIGNED-PAYLOAD\r\n" +
		"X-Amz-Date: 20261207T224000Z\r\n"
	if rng != "" {
		r += "Range: " + rng + "\r\n"
	}
	return r + "\r\n"
}

// exchange writes reqs on a new connection to addr at once (pipelined),
// half-closes it and returns everything the server sent until it closed.
func exchange(t *testing.T, addr string, reqs []string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, strings.Join(reqs, "")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("%q: %v (after %q)", reqs, err, b)
	}
	return string(b)
}

// unstable masks what two answers to one request may differ in: the
// time, and gofakes3's request ids.
var unstable = regexp.MustCompile(`(?m)^(Date: |X-Amz-Id-2: |X-Amz-Request-Id: ).*\r$|<RequestId>[^<]*</RequestId>`)

// TestConnLoopMatchesNetHTTP: the connection loop's answers, byte for byte
// but for the time, are net/http's to the same bytes (the same server
// without the loop): plain GETs and HEADs of objects, which the loop
// answers, pipelined, and what it leaves to net/http (listings, PUTs,
// conditions, ranges it does not parse, a missing key, malformed or
// unusual requests), also after answers of its own on one connection.
func TestConnLoopMatchesNetHTTP(t *testing.T) {
	root := t.TempDir()
	body := strings.Repeat("0123456789", 100)
	writeTree(t, root, map[string]string{"lake/a/obj.bin": body, "lake/empty": "", "lake/%%pct": "escaped",
		"lake/x.html": "<html><body>hi</body></html>", "lake/big.bin": strings.Repeat("ab", 300_000)})
	loop := startS3(t, Options{Root: root})
	ref := startS3(t, Options{Root: root, noConnLoop: true})
	if loop.conns == nil {
		t.Skip("no connection loop on this system")
	}
	get := func(target, rng string) string { return sdkGet(target, rng) }
	raw := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	for _, c := range []struct {
		name string
		reqs []string
		loop int64 // requests the loop answers
	}{
		{"whole object", []string{get("/lake/a/obj.bin?x-id=GetObject", "")}, 1},
		{"ranges pipelined", []string{get("/lake/a/obj.bin?x-id=GetObject", "bytes=0-9"), get("/lake/a/obj.bin", "bytes=990-"),
			get("/lake/a/obj.bin", "bytes=995-2000"), get("/lake/a/obj.bin", "bytes=10-600")}, 4},
		{"past the sniffed bytes, sendfile", []string{get("/lake/big.bin?x-id=GetObject", "bytes=1000-300999"), get("/lake/big.bin", "")}, 2},
		{"sniffed type", []string{get("/lake/x.html", "bytes=0-5"), get("/lake/x.html", "")}, 2},
		{"empty and escaped", []string{get("/lake/empty", ""), get("/lake/%25pct", "")}, 2},
		{"head", []string{"HEAD /lake/a/obj.bin HTTP/1.1\r\nHost: h\r\n\r\n", "HEAD /lake/a/obj.bin HTTP/1.1\r\nHost: h\r\nRange: bytes=100-199\r\n\r\n"}, 2},
		{"then net/http", []string{get("/lake/a/obj.bin", "bytes=0-9"), get("/lake/a/obj.bin", "bytes=-10"), get("/lake/a/obj.bin", "bytes=0-9")}, 1},
		{"left to gofakes3", []string{get("/lake/a/obj.bin", "bytes=1000-"), get("/lake/a/obj.bin", "bytes=5-1"), get("/lake/a", ""),
			get("/lake/missing", ""), get("/nobucket/x", ""), get("/lake/a/obj.bin?versionId=1", "")}, 0},
		{"listing", []string{get("/lake?list-type=2&prefix=a/", "")}, 0},
		{"conditional", []string{raw("GET /lake/a/obj.bin HTTP/1.1\nHost: h\nIf-None-Match: \"x\"\n\n")}, 0},
		{"put", []string{raw("PUT /lake/new HTTP/1.1\nHost: h\nContent-Length: 3\n\nabc"), get("/lake/a/obj.bin", "")}, 0},
		{"missing host", []string{raw("GET /lake/a/obj.bin HTTP/1.1\nX: y\n\n")}, 0},
		{"two hosts", []string{raw("GET /lake/a/obj.bin HTTP/1.1\nHost: a\nHost: b\n\n")}, 0},
		{"two ranges", []string{raw("GET /lake/a/obj.bin HTTP/1.1\nHost: a\nRange: bytes=0-1\nRange: bytes=2-3\n\n")}, 0},
		{"http/1.0", []string{raw("GET /lake/a/obj.bin HTTP/1.0\nHost: h\n\n")}, 0},
		{"connection close", []string{raw("GET /lake/a/obj.bin HTTP/1.1\nHost: h\nConnection: close\n\n"), get("/lake/a/obj.bin", "")}, 0},
		{"bad header", []string{raw("GET /lake/a/obj.bin HTTP/1.1\nHost: h\nBad Name: v\n\n")}, 0},
		{"folded header", []string{raw("GET /lake/a/obj.bin HTTP/1.1\nHost: h\nX-A: v\n w\n\n")}, 0},
		{"bad escape", []string{raw("GET /lake/a%zz HTTP/1.1\nHost: h\n\n")}, 0},
		{"double slash", []string{raw("GET //lake/a/obj.bin HTTP/1.1\nHost: h\n\n")}, 0},
		{"long head", []string{raw("GET /lake/a/obj.bin HTTP/1.1\nHost: h\nX-Pad: " + strings.Repeat("p", 5000) + "\n\n")}, 0},
		{"post", []string{raw("POST /lake/a/obj.bin HTTP/1.1\nHost: h\nContent-Length: 0\n\n")}, 0},
	} {
		before := loop.loopServed.Load()
		got := exchange(t, loop.ln.Addr().String(), c.reqs)
		if n := loop.loopServed.Load() - before; n != c.loop {
			t.Errorf("%s: the loop answered %d requests, want %d", c.name, n, c.loop)
		}
		want := exchange(t, ref.ln.Addr().String(), c.reqs)
		if g, w := unstable.ReplaceAllString(got, "~"), unstable.ReplaceAllString(want, "~"); g != w {
			t.Errorf("%s:\nloop     %q\nnet/http %q", c.name, clip(g), clip(w))
		}
	}
}

// clip shortens an answer for a failure message.
func clip(s string) string {
	if len(s) > 3000 {
		return s[:1500] + " ... " + s[len(s)-1500:]
	}
	return s
}

// TestConnLoopStaysCurrent: an object overwritten or deleted through the
// endpoint or beside it is never answered from what was there before.
func TestConnLoopStaysCurrent(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"lake/k": "one"})
	srv := startS3(t, Options{Root: root})
	addr := srv.ln.Addr().String()
	bodyOf := func(ans string) string {
		_, b, _ := strings.Cut(ans, "\r\n\r\n")
		return b
	}
	if b := bodyOf(exchange(t, addr, []string{sdkGet("/lake/k", "")})); b != "one" {
		t.Fatalf("body %q", b)
	}
	put := strings.ReplaceAll("PUT /lake/k HTTP/1.1\nHost: h\nContent-Length: 3\n\n", "\n", "\r\n") + "two"
	ans := exchange(t, addr, []string{put, sdkGet("/lake/k", "")})
	if i := strings.LastIndex(ans, "HTTP/1.1 "); i < 0 || bodyOf(ans[i:]) != "two" {
		t.Fatalf("after PUT: %q", ans)
	}
	writeTree(t, root, map[string]string{"lake/k": "three!"})
	if b := bodyOf(exchange(t, addr, []string{sdkGet("/lake/k", "")})); b != "three!" {
		t.Fatalf("after a write beside the endpoint: %q", b)
	}
	del := strings.ReplaceAll("DELETE /lake/k HTTP/1.1\nHost: h\n\n", "\n", "\r\n")
	ans = exchange(t, addr, []string{del, sdkGet("/lake/k", "")})
	if !bytes.Contains([]byte(ans), []byte("NoSuchKey")) {
		t.Fatalf("after DELETE: %q", ans)
	}
}
