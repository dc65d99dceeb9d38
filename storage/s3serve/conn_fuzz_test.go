package s3serve

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"
)

// FuzzParseRequest feeds parseRequest arbitrary request heads: it must not
// panic, and a request it accepts (the connection loop then answers it
// instead of net/http) must be one net/http's own parser (http.ReadRequest,
// the oracle) reads as the same GET or HEAD of the same path and query with
// the same Range, a Host, no body and the connection kept alive, so that
// the loop answers what the middleware would have seen.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		sdkGet("/lake/a/obj.bin?x-id=GetObject", "bytes=0-9"),
		sdkGet("/lake/%25pct", ""),
		"HEAD /lake/a HTTP/1.1\r\nHost: h\r\nRange: bytes=1-\r\n\r\n",
		"GET /lake/a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
		"GET /lake/a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc",
		"GET /lake/a HTTP/1.1\r\nhost: h\r\nHOST: i\r\n\r\n",
		"GET /lake/a%2Fb HTTP/1.1\r\nHost: [::1]:9000\r\n\r\n",
		"GET /lake/a HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",
		"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET http://h/lake/a HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /lake/a HTTP/1.1\r\nHost: h\r\nRange:  bytes=0-1 \t\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		i := bytes.Index(in, []byte("\r\n\r\n"))
		if i < 0 {
			return
		}
		head := in[:i+4]
		r, ok := parseRequest(head)
		if !ok {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("the loop answers %q, which net/http refuses: %v", head, err)
		}
		method := http.MethodGet
		if r.head {
			method = http.MethodHead
		}
		switch {
		case req.Method != method, req.URL.Path != r.path, req.URL.RawQuery != r.query,
			req.Header.Get("Range") != r.rng, len(req.Header.Values("Range")) > 1:
			t.Fatalf("%q: loop %+v, net/http %s %q ? %q Range %q", head, r, req.Method, req.URL.Path, req.URL.RawQuery, req.Header.Values("Range"))
		case req.Host == "", req.ContentLength != 0, len(req.TransferEncoding) > 0, req.Close,
			req.Header.Get("Expect") != "", req.Header.Get("If-None-Match") != "", req.Header.Get("If-Match") != "",
			req.Header.Get("If-Modified-Since") != "", req.Header.Get("If-Unmodified-Since") != "":
			t.Fatalf("%q: the loop answers a request net/http reads as %+v", head, req)
		}
	})
}
