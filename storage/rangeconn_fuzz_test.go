package storage

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"
)

// FuzzReadAnswer feeds readAnswer arbitrary bytes off the wire: it must
// not panic, and where net/http's own parser (http.ReadResponse, the
// oracle) also reads the same bytes, an answer the getter reads itself
// (not left to net/http) means what net/http reads: the status, a body
// that is not chunked, the Content-Length, the Content-Range and whether
// the connection closes after it.
func FuzzReadAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 206 Partial Content\r\nContent-Length: 4\r\nContent-Range: bytes 10-13/100\r\n\r\nabcd",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
		"HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc",
		"HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\nContent-Length: 20\r\n\r\n<Error>NoSuchKey</Er",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 206 \r\ncontent-length: 1\r\ncontent-range: bytes 0-0/1\r\n\r\nx",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy",
		"HTTP/2 200\r\n\r\n",
		"HTTP/1.1 -20 x\r\n\r\n", // a negative status, which net/http refuses
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := readAnswer(bufio.NewReaderSize(bytes.NewReader(in), 4<<10))
		if err != nil {
			return
		}
		if a.status < 0 || a.status > 999 || a.length < -1 {
			t.Fatalf("status %d, length %d from %q", a.status, a.length, in)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://x/o", nil)
		r, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(in)), req)
		if err != nil {
			return // net/http is stricter in places: nothing to compare
		}
		defer r.Body.Close()
		if r.StatusCode != a.status {
			t.Fatalf("status %d, net/http %d, from %q", a.status, r.StatusCode, in)
		}
		if a.status/100 == 1 || a.chunked || a.length < 0 {
			return // left to net/http (errFallback), a narrower reading at worst
		}
		if len(r.TransferEncoding) > 0 {
			t.Fatalf("read as not chunked, net/http reads %v, from %q", r.TransferEncoding, in)
		}
		if r.ContentLength != a.length {
			t.Fatalf("length %d, net/http %d, from %q", a.length, r.ContentLength, in)
		}
		if cr := r.Header.Get("Content-Range"); a.status/100 == 2 && cr != a.contentRange {
			t.Fatalf("Content-Range %q, net/http %q, from %q", a.contentRange, cr, in)
		}
		if r.Close != a.close {
			t.Fatalf("close %v, net/http %v, from %q", a.close, r.Close, in)
		}
	})
}
