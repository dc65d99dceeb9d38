package s3serve

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestS3ObjectFastPath: a plain GET or HEAD of an object, answered by the
// middleware (serveObject), gets the status, headers and body gofakes3
// gives the same request (forced there by a query parameter it ignores),
// for whole objects, ranges, a range past the end, HEAD with a range, and
// the forms serveObject leaves to gofakes3 (suffix range, unsatisfiable
// range, a directory, a missing key, a missing bucket).
func TestS3ObjectFastPath(t *testing.T) {
	root := t.TempDir()
	body := strings.Repeat("0123456789", 100)
	writeTree(t, root, map[string]string{"lake/a/obj.bin": body, "lake/empty": "", "lake/%%pct": "escaped"})
	srv := startS3(t, Options{Root: root})
	do := func(method, path, query, rng string) (int, http.Header, string) {
		t.Helper()
		u := srv.URL() + path
		if query != "" {
			u += "?" + query
		}
		req, err := http.NewRequest(method, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, c := range []struct {
		method, path, rng string
		fast              bool // served by serveObject
	}{
		{"GET", "/lake/a/obj.bin", "", true},
		{"GET", "/lake/a/obj.bin", "bytes=0-9", true},
		{"GET", "/lake/a/obj.bin", "bytes=990-", true},
		{"GET", "/lake/a/obj.bin", "bytes=995-2000", true},
		{"GET", "/lake/a/obj.bin", "bytes=10-20", true},
		{"GET", "/lake/empty", "", true},
		{"GET", "/lake/%25pct", "", true},
		{"HEAD", "/lake/a/obj.bin", "", true},
		{"HEAD", "/lake/a/obj.bin", "bytes=100-199", true},
		{"GET", "/lake/a/obj.bin", "bytes=-10", false},
		{"GET", "/lake/a/obj.bin", "bytes=1000-", false},
		{"GET", "/lake/a/obj.bin", "bytes=5-1", false},
		{"GET", "/lake/a", "", false},
		{"GET", "/lake/missing", "", false},
		{"GET", "/nobucket/x", "", false},
	} {
		name := c.method + " " + c.path + " " + c.rng
		fs, fh, fb := do(c.method, c.path, "x-id=GetObject", c.rng)
		gs, gh, gb := do(c.method, c.path, "ethstream-test=gofakes3", c.rng)
		// gofakes3 stamps a request id on every answer; serveObject does not.
		if fast := fh.Get("X-Amz-Request-Id") == ""; fast != c.fast {
			t.Errorf("%s: served by serveObject = %v, want %v", name, fast, c.fast)
		}
		if fs != gs || fb != gb {
			t.Errorf("%s: serveObject %d %q, gofakes3 %d %q", name, fs, fb, gs, gb)
		}
		for _, k := range []string{"Content-Length", "Content-Range", "Content-Type", "Etag", "Last-Modified", "Accept-Ranges", "Server", "Access-Control-Allow-Origin"} {
			if fh.Get(k) != gh.Get(k) {
				t.Errorf("%s: %s = %q, gofakes3 %q", name, k, fh.Get(k), gh.Get(k))
			}
		}
	}
}
