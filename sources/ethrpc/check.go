package ethrpc

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

var _ stream.Checker = (*Source)(nil)

// checkRetries bounds the probe: a start should fail in seconds on an
// endpoint that does not answer, not after the full retry budget.
const checkRetries = 2

// Check probes the endpoints before a start writes anything (stream.Checker):
// one eth_blockNumber must succeed on some endpoint. It opens its own
// connections and closes them.
func (s *Source) Check(ctx context.Context) error {
	p := newPool(s.o.Endpoints, stream.SystemClock{}, s.o.Timeout, min(s.o.MaxRetries, checkRetries), s.o.MaxResponseSize, slog.New(slog.DiscardHandler))
	defer p.close()
	var bn hexutil.Uint64
	err := p.call(ctx, "eth_blockNumber", func(ctx context.Context, c *rpc.Client) error {
		return c.CallContext(ctx, &bn, "eth_blockNumber")
	})
	var oe *net.OpError
	if errcode.Is(err, CodeRPCUnavailable) && errors.As(err, &oe) && oe.Err != nil {
		// Say what the transport said, without the HTTP client's wrapping.
		msg := oe.Err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		eps := make([]string, len(s.o.Endpoints))
		for i, e := range s.o.Endpoints {
			eps[i] = redact(e)
		}
		return errcode.New(CodeRPCUnavailable, "", "start the node or check the endpoint URL (and add another with endpoints=)",
			"no JSON-RPC endpoint answers (%s: %s)", strings.Join(eps, ", "), msg)
	}
	return err
}
