package stream

import "context"

// Side numbers a two-input operator's inputs: a join's left and right.
const (
	LeftSide  = 0
	RightSide = 1
)

// SideOperator is a stateful operator with two inputs (a stream-stream
// join): the engine hands it each chunk of a two-input query's sources with
// the side the source belongs to (engine.Query.Sides), instead of Process.
// Everything else (Finish, Commit, Abort, Repartition) is Operator's, once
// per batch for both sides together.
type SideOperator interface {
	Operator
	// ProcessSide consumes one chunk of side side's input of batch batchID
	// (LeftSide or RightSide); watermarkMs is the batch's watermark, as for
	// Process.
	ProcessSide(ctx context.Context, batchID, watermarkMs int64, side int, in *Batch) error
}
