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

// SideColumnsReader is implemented by a SideOperator that reads only some
// columns of a side's rows: InputColumns are those of side side, known
// once the operator is open (a join whose state was recorded with more
// columns than the query reads keeps storing them: it reads them too).
// The engine adds them to a projected side's columns when it opens its
// sources. Nil: every column.
type SideColumnsReader interface {
	InputColumns(side int) []string
}

// WatermarkProducer is implemented by an operator whose output rows may be
// older than its input watermark (Spark's
// StateStoreWriter.produceOutputWatermark): OutputWatermark is the
// watermark of its output, the input watermark of the operator after it,
// given its own input watermark inputMs. An operator that does not
// implement it passes its input watermark on unchanged, as Spark's default.
type WatermarkProducer interface {
	OutputWatermark(inputMs int64) int64
}
