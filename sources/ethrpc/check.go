package ethrpc

import (
	"context"
	"log/slog"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
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
	p := newPool(s.o.Endpoints, stream.SystemClock{}, s.o.Timeout, min(s.o.MaxRetries, checkRetries), slog.New(slog.DiscardHandler))
	defer p.close()
	var bn hexutil.Uint64
	return p.call(ctx, "eth_blockNumber", func(ctx context.Context, c *rpc.Client) error {
		return c.CallContext(ctx, &bn, "eth_blockNumber")
	})
}
