// Package agg is ethstream's stateful grouped aggregation: event-time
// windows, watermark, count/sum/min/max, and the update, append and complete
// output modes, as an stream.Operator over the Pebble-backed state.Store
// (docs/contracts.md: Reference query, State, Progress records). The reference query
//
//	groupBy(window(block_ts, "5 minutes"), source, miner).count()
//	withWatermark(block_ts, "2 days"), outputMode("update")
//
// is one Spec; nothing in the package knows about blocks.
//
// # Semantics (Spark's)
//
// Windows are aligned to the Unix epoch: a row at event time t belongs to every
// window [start, start+size) with start a multiple of the slide and
// start <= t < start+size (one window when tumbling). Rows with a null event
// time are skipped (Spark's window() filters them).
//
// The operator does not compute the watermark. The engine does, from the
// event-time column of the rows it reads (after batch N: the larger of N's
// watermark and N's maximum event time minus the delay, recorded in
// commits/N and used by batch N+1), and passes Process the previous
// batch's watermark and Finish the batch's own (Spark 3.4+'s
// getInputWatermarkForLateEvents and getInputWatermarkForEviction). With a
// watermark:
//
//   - Process drops each window instance whose end <= its watermark and
//     counts it in numRowsDroppedByWatermark (a row of a sliding window can
//     be dropped for one window and kept for another). A row older than the
//     watermark whose window is still open is kept.
//   - Finish merges the batch's partial aggregates into state, then evicts
//     every key whose window end <= its watermark: a window ending between
//     the two watermarks takes the batch's rows and leaves state in the same
//     batch (append mode emits it then, update mode emits its new value).
//
// Without a watermark (no Spec.HasWatermark and no positive delay) nothing
// is late and nothing is evicted; the watermark argument is ignored.
//
// # Watermark delay 0
//
// A delay of 0 is a watermark, as in Spark (withWatermark(col, "0
// seconds"); Spark requires only that the delay not be negative): the
// watermark is the max event time seen, and the rules above apply. Builds
// before record format 3 (oprecord.go) read a delay of 0 as no watermark;
// a checkpoint whose committed state version they wrote (its record is
// of an older format, or it has none) keeps that reading in update mode,
// the one mode in which they ran such a query: nothing is dropped or
// evicted, exactly as before, the start logs a warning, and each version
// this build then writes says so (legacyZeroDelay in its record), so that
// every later restart keeps it. A new checkpoint, or one whose last
// version this build wrote without legacyZeroDelay (a query that had a
// positive delay, or none), evicts by a delay of 0. The delay itself is
// not state (a change of it is the engine's restart rule to decide).
//
// Output modes: Update returns the keys the batch changed with their new full
// values (not deltas), for a MERGE; Append returns each window once, when it
// is evicted, with its final values; Complete returns every key in state after
// eviction. Spark never evicts in complete mode; here a complete-mode query
// over windows must have a watermark (else UNSUPPORTED_OUTPUT_MODE, as its
// state would grow without bound), and windows the watermark closed leave
// state and the output. Append needs a window and a watermark.
//
// # Retractions
//
// A row with Sign -1 (stream.Batch.Signs) takes back a row an earlier batch
// inserted, with identical values (a block orphaned by a chain
// reorganisation). It goes through the same windows and the same watermark
// rule as an insertion, and then:
//
//   - count and sum subtract (a sum's non-null count too, so a sum whose
//     values were all retracted is null again); avg, where a query needs it,
//     is sum / count of the same group, so it follows. Float sums are undone
//     by subtraction and may differ from a recount in the last bits.
//   - min and max are refused: they keep one value per group, and undoing
//     the minimum would need every row behind it. A Spec with Retractions
//     is refused at New with RETRACTION_UNSUPPORTED naming the aggregate; a
//     query that did not declare retractions gets the same code at the
//     first retraction it receives, before anything of the batch is applied.
//   - a group whose row count reaches zero is deleted from state and, in
//     update mode, emitted with Sign -1 (only its key columns are
//     meaningful), so the sink deletes the row. Append mode never emitted
//     it; complete mode simply no longer lists it. The row count is the
//     first count(*) of the query or, when there is none and the Spec
//     declares Retractions, a hidden value field "__rows" (never output).
//   - a retraction whose window the watermark closed is dropped like a late
//     row (numRowsDroppedByWatermark) and counted in the custom metric
//     numLateRetractions; it is never applied to evicted state. A warning
//     is logged for such a batch.
//   - a group whose row count would go negative (a retraction of a row
//     never inserted) fails the batch with RETRACTION_UNMATCHED.
//
// customMetrics gain numRetractedRows (input rows with Sign -1),
// numLateRetractions (window instances of them dropped as late) and
// numGroupsRetracted (groups emptied, also in numRowsRemoved) when the Spec
// declares Retractions or the batch held a retraction.
//
// State of a source removed from the query is not special: its keys stay in
// state until the watermark, advanced by the remaining sources, closes their
// windows.
//
// # State layout
//
// One state.Store per operator (env.StateDir), schema checked on Open so that
// a changed query fails with STATE_SCHEMA_MISMATCH instead of misreading:
//
//	OperatorName  "stateStoreSave"
//	Key           window_end Timestamp, window_start Timestamp (windowed
//	              queries only), then the group columns with their types.
//	              window_end comes first so that eviction is one range scan
//	              [start, enc(watermark µs + 1)) per partition. A null
//	              String group value is a group of its own, encoded as
//	              state's null String key (state.AppendNullStringKey; no key
//	              written before holds it, so older state reads unchanged).
//	              An Int64 or Timestamp group field is nullable in state
//	              format 2 (state.Field.Nullable: a marker byte, null
//	              first); in format 1 a null of one is NULL_GROUP_KEY.
//	              A global aggregation (no window, no group column) has the
//	              one key field __global Int64, always 0. A group column of
//	              another scalar type (types.go) is recorded by its type's
//	              name and encoded by its class (state's encClass): integer
//	              kinds, BOOLEAN, DATE as Int64 (TINYINT..INT and
//	              TIMESTAMP_NTZ recorded as int64 and timestamp), FLOAT and
//	              DOUBLE as a nullable Float64, BINARY as String, DECIMAL as
//	              a String of its 16 order-preserving bytes.
//	Value         per aggregate, its As name with the output type (count:
//	              Int64; sum of Int64: Int64, of Float64: Float64; min/max:
//	              the input type; avg: its double sum, Float64, or in
//	              format 1 the sum in the input type; of a DECIMAL(p,s) its
//	              sum as DECIMAL(min(38,p+10),s), 16 bytes as a String value;
//	              approx_count_distinct: BINARY, its HyperLogLog++
//	              registers, a String value of 8*(2^p/10+1) bytes, package
//	              hllpp's encoding version 1: Spark's longs of ten 6-bit
//	              registers each, little-endian; p is in the Spec text);
//	              sum/min/max/avg add a field <As>__nonnull Int64,
//	              the number of non-null inputs (0 means SQL null), because
//	              state values are not nullable. A Spec declaring
//	              Retractions without a count(*) adds a last field __rows
//	              Int64 (the group's row count) and its aggregate
//	              count(*):__rows to the Spec text; every other state layout
//	              is unchanged by retractions, so checkpoints written before
//	              them read as they did.
//	Spec          "agg/v2 window=<col> size=<d> slide=<d>[ start=<d>] groupBy=<cols>
//	              aggs=<kind>(<col>|*):<as>,..." (approx_count_distinct is
//	              "approx_count_distinct(<col>,p=<p>):<as>"; start= only for a window
//	              startTime, so older texts are unchanged; what shapes the state
//	              only: the output mode and the watermark delay are checked
//	              by the engine's restart rules; "agg/v1" also named them)
//
// Formats (Spec.StateFormat, never renumbered): 1 is every state written
// before format 2 existed (avg of a BIGINT keeps a long sum, Int64 and
// Timestamp keys are not nullable); 2, the default for a new checkpoint,
// has avg's double sum and nullable keys. The two differ only in those
// fields' types, so the recorded state schema says which a checkpoint
// has: ForRecordedState picks it from the schema the query shape
// recorded, and Open, refused with STATE_SCHEMA_MISMATCH in format 2,
// retries in format 1. A query that has neither an avg of a BIGINT nor a
// BIGINT or TIMESTAMP group key has the same schema in both.
//
// Keys and values use state's encodings (state.AppendInt64Key,
// AppendStringKey, AppendInt64Value, AppendFloat64Value); the operator reads
// values back directly (varint / little-endian float) on the hot path.
//
// # Numbers
//
// count(col), sum, min, max and avg skip nulls; a group whose values were
// all null gives null (count(col) 0). Under spark.sql.ansi.enabled (Spec
// NonANSI false, Spark 4's default) a long sum that leaves BIGINT fails the
// batch in Process or Finish with ARITHMETIC_OVERFLOW naming the batch and
// the aggregate, before its state or output is written; with NonANSI it
// wraps, as Spark 3's. avg sums in a double in both modes, as Spark's
// Average (each BIGINT cast to a double and added), so it never overflows;
// like Spark's, the double sum is exact while it stays below 2^53 and
// otherwise depends on the order of the additions (here: each batch's rows
// in input order, then the batch's partial added to the stored sum). State
// format 1 keeps avg's long sum: exact while it fits, ARITHMETIC_OVERFLOW
// in both modes when it does not.
//
// # Output batch
//
// Columns in order: window_start, window_end (Timestamp, µs; windowed queries
// only), the group columns by name, then one column per aggregate named As
// (Valid set when a sum/min/max saw only nulls). Rows are in key order,
// window start then the group columns (update: the sink merges by key and
// then need not sort), or in state order (append, complete).
//
// # Performance
//
// Process is vectorised per chunk: columns are resolved once, a first pass
// maps each row (per window instance) to a dense entry index through a
// comparison with the chunk's few recent keys or, failing that, a hash
// index of the entries (groupIndex: open-addressing tables of entry
// indexes, one per 128 windows, so that time-ordered input works in a
// cache-sized table; a candidate entry is compared by its columns, the index
// keeps no key bytes), and one tight loop per aggregate then folds values by
// index. An entry's string keys are ids into the partial's intern table, so
// the entries hold no pointer for the collector to scan. No per-row
// allocation or interface boxing; state is touched once
// per distinct key per batch, in Finish. A windowed query outside append
// mode folds each chunk into two partials at once, one per core, each the
// windows of one parity of window index (shard.go): their keys are
// disjoint, so Finish appends the second's entries to the first's and runs
// unchanged (update mode orders entries by key, so the output is the same
// row for row).
//
// # Closed at commit
//
// In update mode with a watermark, the engine tells the operator before
// Finish(N) the watermark batch N+1 will run with (NextWatermark, the
// nextBatchWatermarkMs of commits/N). Spark's state version N holds every
// window ending after batch N's watermark; batch N+1 then merges into
// those ending at or before its own watermark the rows it accepts (those
// not late by batch N's watermark), emits them, and evicts them. In a
// backfill that is nearly every key: each batch would write ~700k keys to
// state only for the next to delete them. So version N does not store a
// key whose window ends at or before the next watermark: Finish still
// merges it with its stored value and emits it, then deletes the stored
// key (if any) instead of writing it, and its eviction scan runs up to the
// next watermark. The number of such rows is the version's closedRows
// (in its operator record, below).
//
// The keys so closed, with their values, are the carry, part of version
// N: in its operator record when its records take at most 32 KB (a live
// batch closes a handful of keys), else in a file of its own beside the
// state files that the record names (carryfile.go gives the format), which
// Finish streams to disk as it closes keys, so that the carry never sits
// in memory (a seed backfill batch closes ~850k keys, 50-90 MB). Batch N+1
// reads a key whose window ends at or before the carry's bound (version
// N's nextWatermarkMs) from the carry when state does not hold it, so its
// rows for those windows merge with batch N's value exactly as with
// Spark's stored key; the first such key reads the whole carry, and a
// batch none of whose keys falls there (every backfill batch) reads
// nothing. Windows are the unit: the carry holds exactly what Spark's
// version N holds and ethstream's does not, and nothing is read from it
// after batch N+1, whose watermark evicts all of it. Writing it rather
// than storing it trades the backfill's write-then-delete of every key in
// the state store for one sequential file a batch, deleted two commits
// later (a rerun of batch N+1 after its commit loads version N).
//
// Since the carry is durable with its version, a restart, an abort or a
// rerun of batch N+1 merges as Spark does. Only versions written by builds
// that kept the carry in memory (a record of format 0 or 1 with closedRows
// > 0), and a version whose carry file is gone (a load of a version older
// than the last two committed ones, whose files were collected, or a file
// removed by hand), have none: the operator then, in batch N+1 only, drops
// input late by the watermark the record names (nextWatermarkMs, batch
// N+1's own) instead of batch N's: rows of windows ending in (WM(N),
// WM(N+1)] are dropped and counted as late, as before Spark 3.4, rather
// than merged with a value the operator no longer has (emitting a partial
// value would overwrite the full one in the sink), and logs a warning
// when a file is gone. A carry file that does not verify is
// CHECKPOINT_CORRUPT, and so is one removed after a batch found it and
// before it read it (the restart falls back as above).
//
// What a state reader sees changes: `ethstream state dump` of version N
// lists only the stored keys (a version written after the last batch's
// successor, such as the final no-data batch of a backfill, is the same as
// Spark's). What the query sees does not: the output, the batches (a no-data
// batch runs whenever the watermark moved, stored keys or not), and the
// progress figures (numRowsTotal counts the closed rows, numRowsRemoved of
// the next batch counts them as evicted) are Spark's. Two custom metrics
// say how much was never stored: numClosedRowsNotStored (rows of
// numRowsTotal closed at this commit) and numRemovedRowsNotStored (rows of
// numRowsRemoved the previous version closed). Append and complete modes,
// and a caller that does not call NextWatermark, store every row.
//
// # Operator record
//
// Each state version carries the aggregation's record of it, bytes the
// state store keeps in the version's metadata without reading them
// (state.Store.SetOperatorRecord; state doc, formatVersion 5). Finish(N)
// sets it for version N; a repartition carries the base version's. It is
// one line of JSON (oprecord.go), format 3 as this build writes it:
//
//	{"format":3,"closedRows":3154,"nextWatermarkMs":1700000000000}
//	{"format":3,"closedRows":2,"nextWatermarkMs":1700000000000,"carry":"<base64 records>"}
//	{"format":3,"closedRows":850000,"nextWatermarkMs":1700000000000,
//	 "carryFile":"00000000000000000012.9f3a61c2d4e5b708.carry","carryBytes":64919084}
//	{"format":3,"nextWatermarkMs":1700000000000,"legacyZeroDelay":true}
//
// Format 1 (builds before the carry) and format 2 (a version with a carry,
// format 1 otherwise) have the fields of format 3 but legacyZeroDelay;
// format 3 says the version was written by a build that reads a watermark
// delay of 0 as a watermark, and legacyZeroDelay that the checkpoint
// keeps the older reading (above, Watermark delay 0).
//
// closedRows (omitted when 0) counts the version's rows closed at commit
// (above), which the next batch counts as removed; nextWatermarkMs (omitted when NextWatermark was
// not called for the batch) is the watermark of batch N+1, the value
// commits/N records as nextBatchWatermarkMs: a start and `checkpoint
// verify` compare the two (CommittedRecord, ReadStateRecord), so that a
// commit replaced by valid JSON with another watermark is
// CHECKPOINT_CORRUPT rather than a silent jump of the watermark.
//
// Format 0 has no "format" field: it is the two fields that state
// metadata formats 3 and 4 (builds up to 27801e4) kept themselves, as the
// store hands them on. A version with no record (state formats 1 and 2)
// has closedRows 0 and no watermark. carry (the records, base64) or
// carryFile with carryBytes (the file's path under the state directory and
// size) are format 2's and 3's, present when closedRows > 0 and the version was
// written by a build that keeps the carry (a format 1 record with
// closedRows > 0 has none: above). Unknown fields, a format above 3, a
// carry in format 1, legacyZeroDelay before format 3, both carry forms, a carry without closedRows or
// nextWatermarkMs, a carryFile that is not a carry file name or
// carryBytes below the file's header and footer, or a negative closedRows
// are CHECKPOINT_CORRUPT naming the .meta (or, on Open, the state
// directory); formats are never renumbered.
//
// # Progress
//
// Finish returns the stateOperators entry (numRowsTotal, numRowsUpdated =
// keys written, numRowsRemoved = keys evicted, numRowsDroppedByWatermark,
// allUpdatesTimeMs, allRemovalsTimeMs, numShufflePartitions and
// numStateStoreInstances = state partitions; customMetrics numInputRows,
// numNullEventTimeRows, numOutputRows, and processTimeMs: the time spent in
// Process, which allUpdatesTimeMs, the merge into state, does not include).
// commitTimeMs and memoryUsedBytes are only known after Commit: Progress
// returns the completed entry then, with the custom metric
// commitPrepareTimeMs, the part of commitTimeMs spent in PrepareCommit.
//
// # Commit
//
// The operator implements stream.CommitPreparer: PrepareCommit(N) has the
// state store write version N's data file (state.Store.Prepare), and
// Commit(N) then publishes it; the engine runs both while the sink writes
// batch N.
// Between the two the batch is finished and nothing of the operator changes.
package agg
