package s3serve

import (
	"context"
	"net"
	"net/http"
	"syscall"
)

// A ranged GET's answer is written in two steps: net/http writes the
// header with the body's first 512 bytes (its content sniffing), then
// sendfile(2) the rest. With TCP_NODELAY (Go's default) the first write
// leaves as a segment of its own, so every GET crosses loopback twice:
// the client is woken for the header, reads it, finds no body yet and
// parks again, and both kernels run the receive path twice. Corking the
// socket for the answer (TCP_CORK on, the writes, off) sends the header
// and the body in the same segments.

// connKey is the context key of a connection's corker (ConnContext).
type connKey struct{}

// corker is a connection's socket, kept once per connection so that a
// request pays no SyscallConn allocation.
type corker struct{ rc syscall.RawConn }

// withCorker is the server's ConnContext: a TCP connection's socket, for
// serveObject to cork.
func withCorker(ctx context.Context, c net.Conn) context.Context {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return ctx
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, connKey{}, &corker{rc: rc})
}

// cork corks r's connection and returns the function that uncorks it
// (which sends what the answer queued); a connection it cannot cork gets
// a no-op.
func cork(r *http.Request) (uncork func()) {
	c, _ := r.Context().Value(connKey{}).(*corker)
	if c == nil {
		return func() {}
	}
	setCork(c.rc, true)
	return func() { setCork(c.rc, false) }
}
