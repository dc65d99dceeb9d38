// Package rawsock reads and writes a TCP connection's socket with system
// calls the Go scheduler is not told of (syscall.RawSyscall), for the S3
// range client and the endpoint's connection loop, the backfill's ~15,000
// ranged GETs.
//
// A socket in Go's poller is non-blocking: a read or write returns at once,
// having copied what it could, or EAGAIN, on which the goroutine waits in
// the poller as net.Conn's would. What the scheduler's bookkeeping of a
// system call buys (another thread given the P while the call blocks) is
// nothing for a call that cannot block, and it costs: a call past sysmon's
// 20 us tick (a 100 KiB read, a sendfile) has its P handed to another
// thread, which wakes and parks again, and a call made while sysmon sleeps
// wakes it for a millisecond of 20 us polls. The endpoint (GOMAXPROCS=1 in
// the bench) spent ~11% of its CPU in sysmon and the client ~8%.
//
// Conn's Read and Write are net.Conn's, errors and all: the same
// *net.OpError ("read tcp A->B: ..."), io.EOF, deadlines and Close
// unblocking them, as the connection's own Read and Write give.
package rawsock

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Conn is a TCP connection whose reads and writes are raw system calls:
// a net.Conn (the rest is the *net.TCPConn's, its ReadFrom's sendfile
// too), for TLS to run over as well. Safe for concurrent use, as a
// net.Conn: Reads wait for each other, and so do Writes.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// The call in progress of each direction under its lock, and the
	// RawConn callbacks bound once (a closure a call would cost
	// allocations).
	rdMu, wrMu      sync.Mutex
	rd, wr          call
	readFn, writeFn func(uintptr) bool
}

// call is a Read's or a Write's buffer and outcome.
type call struct {
	p     []byte
	n     int
	errno syscall.Errno
	short bool // a write of nothing
}

// New returns c's raw reads and writes, or false where there are none (not
// a *net.TCPConn, or not Linux): use c itself then.
func New(c net.Conn) (*Conn, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok || !supported {
		return nil, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, false
	}
	rs := &Conn{TCPConn: tc, rc: rc}
	rs.readFn, rs.writeFn = rs.read, rs.write
	return rs, true
}

// RawConn is the connection's syscall.RawConn, for a caller's own raw
// calls (the endpoint's sendfile).
func (c *Conn) RawConn() syscall.RawConn { return c.rc }

// maxRW caps one call, as internal/poll does (a larger read or write is
// split).
const maxRW = 1 << 30

// Read reads as c.Read does.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rdMu.Lock()
	defer c.rdMu.Unlock()
	c.rd = call{p: p[:min(len(p), maxRW)]}
	err := c.rc.Read(c.readFn)
	n, errno := c.rd.n, c.rd.errno
	c.rd.p = nil
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is Read's RawConn callback: false to wait for data.
func (c *Conn) read(fd uintptr) bool {
	for {
		n, e := rawRead(fd, c.rd.p)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			c.rd.n = n
		default:
			c.rd.errno = e
		}
		return true
	}
}

// Write writes all of p as c.Write does.
func (c *Conn) Write(p []byte) (int, error) {
	c.wrMu.Lock()
	defer c.wrMu.Unlock()
	c.wr = call{p: p}
	err := c.rc.Write(c.writeFn)
	n, errno := c.wr.n, c.wr.errno
	c.wr.p = nil
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	case c.wr.short:
		return n, c.opError("write", io.ErrUnexpectedEOF)
	}
	return n, nil
}

// write is Write's RawConn callback: false to wait for room.
func (c *Conn) write(fd uintptr) bool {
	for c.wr.n < len(c.wr.p) {
		m, e := rawWrite(fd, c.wr.p[c.wr.n:min(len(c.wr.p), c.wr.n+maxRW)])
		switch e {
		case 0:
			if m == 0 {
				c.wr.short = true // as internal/poll: never for a socket
				return true
			}
			c.wr.n += m
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.wr.errno = e
			return true
		}
	}
	return true
}

// opError is net.Conn's error of a failed op: err, or the error of a
// RawConn call unwrapped (its Op is "raw-read" or "raw-write").
func (c *Conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
