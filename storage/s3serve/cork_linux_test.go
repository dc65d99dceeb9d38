package s3serve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestS3RangeOneSegment: a ranged GET's answer, header and body, reaches
// the client in one TCP segment (cork.go), where without the cork the
// header and the body's first 512 bytes leave as a segment of their own;
// a second answer on the same connection is whole and arrives as one
// segment too, so the first left the socket uncorked. Counted by the
// client's TCP_INFO data segments, on loopback (MSS ~64 KiB).
func TestS3RangeOneSegment(t *testing.T) {
	root := t.TempDir()
	body := strings.Repeat("0123456789abcdef", 4<<10) // 64 KiB
	writeTree(t, root, map[string]string{"lake/obj.bin": body})
	srv := startS3(t, Options{Root: root})
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	dataSegs := func() uint32 {
		var n uint32
		if err := rc.Control(func(fd uintptr) {
			info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
			if err != nil {
				t.Fatal(err)
			}
			n = info.Data_segs_in
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	br := bufio.NewReader(c)
	for i, r := range []struct{ off, n int }{{1000, 16 << 10}, {30_000, 20_000}} {
		before := dataSegs()
		if _, err := fmt.Fprintf(c, "GET /lake/obj.bin HTTP/1.1\r\nHost: s3\r\nRange: bytes=%d-%d\r\n\r\n", r.off, r.off+r.n-1); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, []byte(body[r.off:r.off+r.n])) {
			t.Fatalf("answer %d: status %d, %d bytes, err %v; want 206 and bytes %d-%d", i, resp.StatusCode, len(got), err, r.off, r.off+r.n-1)
		}
		if segs := dataSegs() - before; segs != 1 {
			t.Errorf("answer %d (%d bytes) came in %d data segments, want 1", i, r.n, segs)
		}
	}
}
