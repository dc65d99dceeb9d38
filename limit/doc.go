// Package limit is LIMIT n on a stream in append mode, Spark's
// StreamingGlobalLimitExec: the first n rows over the whole stream, across
// batches and restarts, each emitted once; after them every row is
// dropped. A stream.Operator over the state store (package state), as the
// deduplication.
//
// # Rule
//
// The operator keeps the number of rows it has emitted. Each input row,
// in input order, is emitted while that count is below n, and counted;
// the rest of the stream is dropped. Spark refuses LIMIT in update mode
// ("Limits are not supported on streaming DataFrames/Datasets in Update
// output mode", the SQL compiler's refusal); in complete mode a LIMIT is
// a limit of each batch's result, a stateless step (flow.Limit), not this.
//
// # State layout (format 1)
//
//	globalLimit  key: key int64 (always 0, one key: Spark's key is a
//	             NullType column); value: value int64, the rows emitted
//	             so far (Spark's LongType value)
//	spec         "format=1"
//
// n is not part of the state schema, as in Spark: a restart with another
// n continues the count against the new n. The key lives in one state
// partition (the one 0 hashes to); a repartition moves it as any key, so
// the count survives a repartition, online or offline (state.Recorded).
package limit
