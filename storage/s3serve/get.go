package s3serve

import (
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/johannesboyne/gofakes3"
)

// serveObject answers a plain GET or HEAD of the object f (opened and
// confined by the middleware) as gofakes3 would, and reports false, having
// written nothing, for a request it leaves to gofakes3: one with a query
// other than x-id (versions, response-* overrides, ...), a conditional header, a Range
// other than "bytes=N-" or "bytes=N-M", an unsatisfiable range, or a path
// that is not a regular file. It is the backfill's hot path where the
// connection loop does not serve (conn.go: a signed endpoint): gofakes3's
// routing, bucket stat, per-request metadata map and Last-Modified
// round trip through time.Parse cost ~50 us a request, for nothing a
// ranged read of an archive file needs. The body goes out by sendfile(2)
// (io.Copy of an *io.LimitedReader over the *os.File).
func serveObject(w http.ResponseWriter, r *http.Request, key string, f *os.File) bool {
	if !plainQuery(r.URL.RawQuery) || r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" ||
		r.Header.Get("If-Match") != "" || r.Header.Get("If-Unmodified-Since") != "" {
		return false
	}
	rr, ok := plainRange(r.Header.Get("Range"))
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	rng, err := rr.Range(st.Size())
	if err != nil {
		return false // gofakes3 answers 416
	}
	start, n := int64(0), st.Size()
	if rng != nil {
		start, n = rng.Start, rng.Length
	}
	get := r.Method == http.MethodGet
	if get && start > 0 {
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return false
		}
	}
	h := w.Header()
	h.Set("Server", "AmazonS3")
	h.Set("Access-Control-Allow-Origin", "*") // gofakes3's CORS
	h.Set("Last-Modified", st.ModTime().UTC().Format(http.TimeFormat))
	h.Set("ETag", `"`+hex.EncodeToString(etag(key, st))+`"`)
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	status := http.StatusOK
	if rng != nil {
		h.Set("Content-Range", "bytes "+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(start+n-1, 10)+"/"+strconv.FormatInt(st.Size(), 10))
		status = http.StatusPartialContent
	}
	w.WriteHeader(status)
	if get {
		_, _ = io.Copy(w, &io.LimitedReader{R: f, N: n}) // a failed copy is a broken connection: the client sees a short body
	}
	return true
}

// plainRange parses an absent Range header (nil) or "bytes=N-" or
// "bytes=N-M"; ok is false for any other form, which gofakes3 parses (and
// refuses or serves) itself.
func plainRange(h string) (rr *gofakes3.ObjectRangeRequest, ok bool) {
	if h == "" {
		return nil, true
	}
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found {
		return nil, false
	}
	first, last, found := strings.Cut(spec, "-")
	start, err := strconv.ParseUint(first, 10, 63)
	if !found || err != nil {
		return nil, false
	}
	rr = &gofakes3.ObjectRangeRequest{Start: int64(start), End: gofakes3.RangeNoEnd}
	if last != "" {
		end, err := strconv.ParseUint(last, 10, 63)
		if err != nil || end < start {
			return nil, false
		}
		rr.End = int64(end)
	}
	return rr, true
}

// plainQuery reports whether a GET or HEAD's query is empty or only the
// operation name the AWS SDK adds ("x-id=GetObject"), which gofakes3
// ignores.
func plainQuery(q string) bool {
	return q == "" || strings.HasPrefix(q, "x-id=") && !strings.Contains(q, "&")
}
