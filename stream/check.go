package stream

import "context"

// Checker is implemented by sources and sinks that can tell, reading only,
// whether a start can use them: a source that its location exists, answers
// and holds data; a sink that its output location is usable. The engine
// calls Check on every source and on the sink before it creates or locks the
// checkpoint, so a start refused for an unreachable endpoint or a bad path
// leaves nothing behind. Check is called before Open, possibly on a value
// that is never opened; it must not create, write or keep anything.
type Checker interface {
	Check(ctx context.Context) error
}

// PartitionLimiter is implemented by operators whose state partitions hold
// operating-system resources (file descriptors). CheckPartitions refuses a
// state of to partitions that replaces one of from partitions (0 for a new
// state; a repartition holds both at once) when this process cannot hold
// them, with a user-facing error saying what to raise. It writes nothing.
type PartitionLimiter interface {
	CheckPartitions(from, to int) error
}
