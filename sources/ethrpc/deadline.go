package ethrpc

import (
	"context"
	"errors"

	"github.com/ethstream/ethstream/errcode"
)

// errBatchDeadline is the cause of a batch context that ran out of
// BatchTimeout (as opposed to the engine stopping the query).
var errBatchDeadline = errors.New("ethrpc batch deadline exceeded")

// batchDeadline bounds one LatestOffset or ReadBatch by BatchTimeout.
func (s *Source) batchDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.o.BatchTimeout, errBatchDeadline)
}

// batchDeadlineErr is what a call returns once ctx ended: RPC_UNAVAILABLE
// with a remedy when the batch deadline ran out, else the context's error
// (the query was stopped).
func batchDeadlineErr(ctx context.Context, what, url string, last error) error {
	if !errors.Is(context.Cause(ctx), errBatchDeadline) {
		return ctx.Err()
	}
	return errcode.Wrap(last, CodeRPCUnavailable, "",
		"check that the endpoint answers (it accepts connections but did not reply), add another with endpoints=, or raise batchTimeout=",
		"%s at %s: no answer within the batch deadline", what, redact(url))
}
