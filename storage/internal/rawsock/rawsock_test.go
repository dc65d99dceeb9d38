package rawsock

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// listen listens on a loopback port for the test's length.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dial returns a connected pair from ln: c (the side under test) and its
// peer, closed when t ends.
func dial(t *testing.T, ln net.Listener) (c, peer *net.TCPConn) {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		a, _ := ln.Accept()
		accepted <- a
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-accepted
	if a == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { d.Close(); a.Close() })
	return d.(*net.TCPConn), a.(*net.TCPConn)
}

// TestConnAsNetConn runs each scenario on two TCP connections, one read
// and written through Conn and one through the net.Conn itself, and
// requires the same bytes, counts and errors (their text, the addresses
// aside, and what errors.Is finds in them): callers judge Conn's errors as
// they judged net.Conn's.
func TestConnAsNetConn(t *testing.T) {
	if !supported {
		t.Skip("no raw system calls here")
	}
	ln := listen(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB: more than the socket buffers hold
	type result struct {
		out  string // what the scenario saw
		errs []error
	}
	scenarios := map[string]func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result{
		"read data": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			go peer.Write([]byte("hello"))
			p := make([]byte, 16)
			n, err := io.ReadAtLeast(c, p, 5)
			return result{out: fmt.Sprintf("%d %q", n, p[:n]), errs: []error{err}}
		},
		"read nothing": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			n, err := c.Read(nil)
			return result{out: fmt.Sprint(n), errs: []error{err}}
		},
		"read to the end": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			peer.Write([]byte("last"))
			peer.Close()
			b, err := io.ReadAll(c)
			n, err2 := c.Read(make([]byte, 4))
			return result{out: fmt.Sprintf("%q %d", b, n), errs: []error{err, err2}}
		},
		"read past the deadline": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			nc.SetReadDeadline(time.Now().Add(-time.Second))
			n, err := c.Read(make([]byte, 4))
			return result{out: fmt.Sprint(n), errs: []error{err}}
		},
		"read unblocked by a deadline": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			time.AfterFunc(20*time.Millisecond, func() { nc.SetReadDeadline(time.Unix(1, 0)) })
			n, err := c.Read(make([]byte, 4))
			return result{out: fmt.Sprint(n), errs: []error{err}}
		},
		"read unblocked by Close": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			time.AfterFunc(20*time.Millisecond, func() { nc.Close() })
			n, err := c.Read(make([]byte, 4))
			return result{out: fmt.Sprint(n), errs: []error{err}}
		},
		"read reset": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			peer.SetLinger(0)
			peer.Close()
			time.Sleep(20 * time.Millisecond)
			n, err := c.Read(make([]byte, 4))
			return result{out: fmt.Sprint(n), errs: []error{err}}
		},
		"write more than the buffers hold": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			var got []byte
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, _ = io.ReadAll(peer)
			}()
			time.Sleep(20 * time.Millisecond) // the writer waits for room
			n, err := c.Write(big)
			nc.CloseWrite()
			wg.Wait()
			return result{out: fmt.Sprint(n, bytes.Equal(got, big)), errs: []error{err}}
		},
		"write past the deadline": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			nc.SetWriteDeadline(time.Now().Add(-time.Second))
			n, err := c.Write([]byte("x"))
			return result{out: fmt.Sprint(n), errs: []error{err}}
		},
		"write after Close": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			nc.Close()
			n, err := c.Write([]byte("x"))
			return result{out: fmt.Sprint(n), errs: []error{err}}
		},
		"write reset": func(t *testing.T, c io.ReadWriter, nc, peer *net.TCPConn) result {
			peer.SetLinger(0)
			peer.Close()
			time.Sleep(20 * time.Millisecond)
			_, err := c.Write([]byte("x"))
			for i := 0; err == nil && i < 100; i++ {
				_, err = c.Write([]byte("x"))
			}
			return result{errs: []error{err}}
		},
	}
	for name, run := range scenarios {
		t.Run(name, func(t *testing.T) {
			nc1, peer1 := dial(t, ln)
			rs, ok := New(nc1)
			if !ok {
				t.Fatal("New refused a TCP connection")
			}
			got := run(t, rs, nc1, peer1)
			nc2, peer2 := dial(t, ln)
			want := run(t, nc2, nc2, peer2)
			if got.out != want.out {
				t.Errorf("Conn saw %s, net.Conn %s", got.out, want.out)
			}
			for i := range want.errs {
				g := errorText(got.errs[i], nc1)
				w := errorText(want.errs[i], nc2)
				if g != w {
					t.Errorf("error %d: Conn's %q, net.Conn's %q", i, g, w)
				}
			}
		})
	}
}

// errorText is err's text with c's addresses named, and the errors that
// errors.Is finds in it.
func errorText(err error, c net.Conn) string {
	if err == nil {
		return "<nil>"
	}
	s := strings.NewReplacer(c.LocalAddr().String(), "LOCAL", c.RemoteAddr().String(), "REMOTE").Replace(err.Error())
	for _, target := range []error{io.EOF, net.ErrClosed, os.ErrDeadlineExceeded, syscall.ECONNRESET, syscall.EPIPE, io.ErrUnexpectedEOF} {
		if errors.Is(err, target) {
			s += fmt.Sprintf(" [is %v]", target)
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		s += fmt.Sprintf(" [timeout %v]", ne.Timeout())
	}
	return s
}

// TestNewOnlyTCP: a connection that is not TCP is not Conn's.
func TestNewOnlyTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, ok := New(a); ok {
		t.Error("New accepted a net.Pipe")
	}
}

// TestConnConcurrent: as a net.Conn, a Conn is read by several goroutines
// at once and written by several at once (net/http and TLS may), every
// byte arriving once.
func TestConnConcurrent(t *testing.T) {
	if !supported {
		t.Skip("no raw system calls here")
	}
	d, a := dial(t, listen(t))
	w, _ := New(d)
	r, _ := New(a)
	const writers, chunks, size = 4, 64, 4 << 10
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chunk := bytes.Repeat([]byte{byte('a' + i)}, size)
			for range chunks {
				if _, err := w.Write(chunk); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		w.CloseWrite()
	}()
	var mu sync.Mutex
	counts := map[byte]int{}
	var rg sync.WaitGroup
	for range 3 {
		rg.Add(1)
		go func() {
			defer rg.Done()
			p := make([]byte, 1500)
			for {
				n, err := r.Read(p)
				mu.Lock()
				for _, b := range p[:n] {
					counts[b]++
				}
				mu.Unlock()
				if err == io.EOF {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	rg.Wait()
	for i := range writers {
		if got := counts[byte('a'+i)]; got != chunks*size {
			t.Errorf("writer %d: %d bytes arrived, want %d", i, got, chunks*size)
		}
	}
	if len(counts) != writers {
		t.Errorf("bytes of %d kinds arrived, want %d", len(counts), writers)
	}
}
