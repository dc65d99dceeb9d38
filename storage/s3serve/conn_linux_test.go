package s3serve

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPagesCached: serveFast reads a body with raw system calls only when
// every page of it is in the page cache; a range touching one page the
// kernel dropped is read the blocking way.
func TestPagesCached(t *testing.T) {
	page := int64(os.Getpagesize())
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 3*page+100), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	f := file{fd: fd}
	// Written pages are dirty until synced, and kept while dirty.
	if err := unix.Fsync(fd); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if f.pagesCached(0, 3*page+100) {
		t.Skip("the file system keeps its pages (tmpfs?), or cachestat is missing")
	}
	// Page 1 alone read back (no read-ahead of its neighbours).
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pread(fd, make([]byte, page), page); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off, n int64
		want   bool
	}{
		{page, page, true},
		{page + 10, 100, true},
		{2*page - 1, 1, true},
		{page - 1, 2, false},     // reaches back into page 0
		{2*page - 1, 2, false},   // on into page 2
		{page - 100, 200, false}, // both ends
		{0, 3*page + 100, false},
	} {
		if got := f.pagesCached(c.off, c.n); got != c.want {
			t.Errorf("pagesCached(%d, %d) = %v, want %v", c.off, c.n, got, c.want)
		}
	}
}

// TestConnLoopFIFO: a FIFO planted under the root does not stop the loop,
// whose opens are raw system calls (no other thread takes the P while one
// waits): another connection's GET is answered while the FIFO's waits in
// net/http for a writer, as it did before the loop, on the one P the bench
// gives the endpoint.
func TestConnLoopFIFO(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	root := t.TempDir()
	writeTree(t, root, map[string]string{"lake/k": "one"})
	fifo := filepath.Join(root, "lake", "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startS3(t, Options{Root: root})
	addr := srv.ln.Addr().String()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, sdkGet("/lake/fifo", "")); err != nil {
		t.Fatal(err)
	}
	// Whoever opened the FIFO for reading is let go at the end.
	defer func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	}()
	time.Sleep(50 * time.Millisecond) // the FIFO's request reaches the server first
	ans := exchange(t, addr, []string{sdkGet("/lake/k", "")})
	if _, b, _ := strings.Cut(ans, "\r\n\r\n"); b != "one" {
		t.Fatalf("answer %q", ans)
	}
}
