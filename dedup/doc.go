// Package dedup is the streaming deduplication operator, Spark's
// dropDuplicates(cols) (StreamingDeduplicateExec, operator name "dedupe")
// and dropDuplicatesWithinWatermark(cols)
// (StreamingDeduplicateWithinWatermarkExec, "dedupeWithinWatermark"), a
// stream.Operator over the same state store (package state) as the
// aggregation.
//
// # Rule
//
// A row is emitted, unchanged, if no row with the same values of the
// deduplication columns is in state; it is then put in state, and a later
// row with those values is dropped and counted (the customMetrics entry
// numDroppedDuplicateRows). Nulls are values: two rows with a null in the
// same column are duplicates (Spark compares the key rows). When the query
// has a watermark, a row whose event time is at or before the watermark the
// operator drops late input by (Process's: the engine gives the previous
// batch's, Spark 3.4+'s getInputWatermarkForLateEvents; Finish evicts by
// the batch's own) is dropped first and counted as
// numRowsDroppedByWatermark (Spark's watermarkPredicateForDataForLateEvents);
// a null event time is never late.
//
// # State layout (format 1)
//
// The state schema recorded with every version (state.Schema, checked on
// Open; a change of columns is STATE_SCHEMA_MISMATCH, as Spark's state
// schema check) is:
//
//	dedupe                key: the columns, in the order given; value: none
//	dedupeWithinWatermark key: the columns; value: expiresAtMicros timestamp
//
// Keys use the state package's order-preserving key encoding, with Int64
// and Timestamp key fields nullable. dropDuplicates evicts a key once the
// batch's watermark is at or past its event-time column, when the event-time
// column is one of the columns (Spark's watermarkPredicateForKeysForEviction);
// otherwise its state grows without bound, as Spark's. WithinWatermark
// stores expiresAtMicros = event time + the watermark delay and evicts a key
// once the watermark reaches it (expiresAtMicros <= watermark), as Spark's
// evictDupInfoFromState; a null event time stores 0 (Spark reads a null
// long as 0).
//
// Eviction scans every key (the event time is not the key's prefix, as in
// Spark's layout); the operator remembers the least event time or expiry it
// stored so that a batch whose watermark is below it scans nothing.
//
// A key is looked up in state only when the operator's absence filter
// (absent.go: an in-memory set of the 64-bit hashes of every key in state,
// never written anywhere) does not rule it out, so a backfill's new keys
// cost no read; and the store's cache is lazy (state.Options.LazyCache),
// so a backfill that reads nothing writes no Pebble instance either. The
// filter changes nothing on disk.
//
// The operator keeps no record of its own (state.Store.OperatorRecord is
// empty), so the state package's offline repartition (state.Recorded) and
// state dump read it as any other operator's.
package dedup
