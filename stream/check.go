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

// MoveChecker is implemented by sources that can resume at a new location
// the log they kept at an old one: the same files, moved (a mirror of a
// bucket, another prefix, a local directory copied to S3). The engine calls
// CheckMove before the start writes anything, when the query shape recorded
// in the checkpoint names the source at oldLocation and the starting query
// at another; env is what Open would get (MetadataDir, FS, Name; the
// directory may not exist), and it must only read there.
//
// CheckMove returns false, nil when the source was not told of a move from
// oldLocation (the restart rules then refuse the change as before), true
// when it was and every file it recorded is at the new location (the rules
// then allow it, and Open maps the old location to the new one), and an
// error, naming the first file that is missing or differs, when it was told
// but the files do not match.
type MoveChecker interface {
	CheckMove(ctx context.Context, env SourceEnv, oldLocation string) (bool, error)
}
