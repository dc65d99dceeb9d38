// Package listen opens the TCP listeners of ethstream's embedded servers
// (the S3 endpoint, the JSON-RPC node) with the user-facing errors both
// give for a bad --addr.
package listen

import (
	"errors"
	"net"
	"syscall"

	"github.com/ethstream/ethstream/errcode"
)

// CodeAddressInUse: the --addr asked for is taken by another process.
const CodeAddressInUse = "ADDRESS_IN_USE"

// TCP listens on addr, turning "address already in use" into
// CodeAddressInUse and any other failure into INVALID_ARGUMENT, each with a
// remedy.
func TCP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, errcode.Wrap(err, CodeAddressInUse, "", "pass another --addr (or 127.0.0.1:0 for a free port) or stop the process using it", "cannot listen on %s", addr)
		}
		return nil, errcode.Wrap(err, errcode.InvalidArgument, "", "pass --addr HOST:PORT on loopback, e.g. 127.0.0.1:9000", "cannot listen on %s", addr)
	}
	return ln, nil
}
