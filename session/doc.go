// Package session is the session window aggregation, Spark's
// groupBy(session_window(ts, gap), keys...).agg(...) in a streaming query
// (SessionWindowStateStoreRestoreExec, MergingSessionsExec and
// SessionWindowStateStoreSaveExec, operator name
// "sessionWindowStateStoreSaveExec"), a stream.Operator over the state
// store (package state). The aggregate functions are the grouped
// aggregation's (agg.Buffers): the same types, null rules, overflow rule
// and value encoding.
//
// # Rule (Spark's)
//
// A row at event time t with gap g opens the session [t, t+g); sessions of
// the same group key merge when one starts at or before the other's end
// (MergingSessionsIterator: start <= current end), so a session is the
// smallest span covering rows each within g of the previous one. Sessions
// merge across batches and whatever order rows arrive in: a late row
// between two sessions bridges them into one. The gap is a constant or,
// as Spark 3.2+'s dynamic gap, a string column holding an interval per row;
// a row whose gap is null, malformed or not positive, or whose event time
// is null, has no session and is skipped (Spark filters it), counted in
// the custom metrics numInvalidGapRows and numNullEventTimeRows.
//
// With a watermark, a row whose one-row session [t, t+g) ends at or before
// the watermark Process gets (the engine's: the previous batch's, Spark
// 3.4+'s getInputWatermarkForLateEvents) is late: dropped and counted in
// numRowsDroppedByWatermark (Spark's restore exec drops it before merging);
// a session that the batch's own watermark (Finish's) closes is merged and
// then evicted in the same batch.
// Output modes: append emits each session once, when the watermark passes
// its end (end <= watermark), and deletes it from state; complete emits
// every stored session each batch and, as Spark's, never evicts. Update is
// refused with Spark's message (UNSUPPORTED_OUTPUT_MODE; Spark 4's class is
// _LEGACY_ERROR_TEMP_3102), append without a watermark likewise, and a
// session window with no other group column as Spark refuses a global
// session aggregation. A retraction (a row with Sign -1) is refused with
// RETRACTION_UNSUPPORTED naming the operator: taking a row out of a session
// may split it, and the state keeps one aggregate per session, not its rows.
//
// # State layout (format 1)
//
// Spark's StreamingSessionWindowStateManagerImplV1: one state row per
// session, keyed by the group columns and the session start. The state
// schema recorded with every version (state.Schema, checked on Open: a
// change is STATE_SCHEMA_MISMATCH) is:
//
//	OperatorName  "sessionWindowStateStoreSaveExec"
//	Key           the group columns in GroupBy order, in the grouped
//	              aggregation's key encoding (agg.GroupKeyField: STRING
//	              and BINARY state's String key with its null form,
//	              DECIMAL its 16 bytes as one, the others nullable; the
//	              BIGINT, TIMESTAMP and STRING fields of earlier versions
//	              are unchanged), then session_start Timestamp (the last
//	              8 bytes of every key, order-preserving)
//	Value         session_end Timestamp, then agg's value fields of the
//	              aggregates (agg.Buffers.ValueFields: per aggregate its
//	              running value, and <As>__nonnull Int64 for
//	              sum/min/max/avg; avg keeps a double sum)
//	Spec          "session/v1 time=<col> gap=<duration>|gapColumn=<col>[
//	              gapExpr=<text>] groupBy=<cols> aggs=<kind>(<col>|*):<as>,..."
//
// The gap is in the spec text, so a restart with another gap is
// STATE_SCHEMA_MISMATCH (stored sessions were merged under the old gap;
// Spark's state schema has no gap and would go on with mixed sessions).
// `ethstream state dump` prints one row per session and the offline
// repartition (state.Recorded) moves the rows as any operator's.
//
// # Operator record
//
// Each version carries the operator's record of it (oprecord.go), one
// line of JSON the state store keeps without reading it, and which a
// repartition carries: {"session":1}, plus "legacyZeroDelay":true below.
// Versions written before it have none.
//
// # Watermark delay 0
//
// A delay of 0 is a watermark, as in Spark (Spec.HasWatermark): the max
// event time seen, which drops late rows and, in append mode, closes
// sessions. Builds before the operator record read a delay of 0 as no
// watermark (and so refused append mode with it); a checkpoint whose
// committed version they wrote keeps that reading in complete mode: no
// row is dropped as late, exactly as before, the start logs a warning,
// and each version this build then writes says legacyZeroDelay, so every
// later restart keeps it. A new checkpoint evicts by a delay of 0.
//
// Unlike Spark, which partitions a session window's state by the group
// columns and finds a key's sessions with a prefix scan, the state store
// partitions by the whole key, so one key's sessions may lie in several
// partitions. The operator therefore keeps an index of every stored
// session's span by group key, built by one scan at Open (and after an
// Abort) and kept up to date by each batch: eviction looks at the index,
// not the store, and so does a merge. In append mode the index holds each
// session's stored value too (the watermark bounds the sessions stored),
// and a batch reads nothing from the store: its Pebble cache is built only
// when a restart or an Abort scans it (state.Options.LazyCache), and
// writes name whether their key is committed (state.Store.PutKnown). In
// complete mode, which keeps every session and scans them all each batch,
// a merge reads the sessions its rows meet by point reads. The index holds
// 16 bytes per stored session (plus its value in append mode) plus each
// key's encoded group columns. Within a batch, a
// key's new rows are merged among themselves whenever their number doubles
// (from 64), so a batch holds about one entry per session it forms rather
// than one per row.
//
// # Output
//
// Columns session_window_start, session_window_end (Timestamp, µs), the
// group columns, then the aggregates named As; rows in key order (group
// columns, then start). The output key is the group columns and the
// session start.
//
// # Progress
//
// numRowsTotal (sessions stored), numRowsUpdated (sessions written this
// batch), numRowsRemoved (sessions deleted: merged into an earlier-starting
// one, or evicted), numRowsDroppedByWatermark, and customMetrics
// numInputRows, numOutputRows, numNullEventTimeRows, numInvalidGapRows and
// processTimeMs.
package session
