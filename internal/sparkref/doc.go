// Package sparkref is a reference for ethstream's SQL: a generator of
// random streaming aggregations over a block schema (an AST, rendered to
// Spark SQL text in the many spellings Spark accepts) and an oracle that
// evaluates the AST over decoded rows, batch by batch, with Spark's
// semantics written out by brute force: three-valued logic, Spark's
// implicit casts in comparisons, the split of the WHERE around the
// watermark (PushPredicateThroughNonJoin), window assignment, late rows
// dropped by window end, nulls in keys and aggregates, and ANSI overflow.
//
// It shares no code with the packages it checks (agg, filter, query) and
// imports none of them: a differential test renders a generated query,
// runs it through ethstream, evaluates the same AST here and compares the
// final tables. It is test support: nothing in a user's run imports it.
//
// What the oracle models, as Spark does it:
//
//   - A batch's watermark is the previous batch's, raised to the previous
//     batch's maximum event time (ms, over the rows the pushed-down
//     conjuncts keep) minus the delay; batch 0's is 0.
//
//   - A row's window instance is dropped when its end <= the previous
//     batch's watermark (windowed queries only; a watermark on an
//     aggregation without a window drops nothing): Spark 3.4+ drops late
//     input by the previous batch's watermark at every stateful operator
//     (PropagateWatermarkSimulator.getInputWatermarkForLateEvents, with
//     spark.sql.streaming.statefulOperator.allowMultiple, the default)
//     and evicts by the batch's own (getInputWatermarkForEviction), so a
//     window ending between the two still takes the batch's rows and is
//     then evicted (append mode emits it). A batch without rows is a
//     quiet trigger: Spark runs a no-data batch there when the watermark
//     moved (MicroBatchExecution asking each stateful operator's
//     shouldRunAnotherBatch, true for an aggregation in append and update
//     mode and a deduplication whether or not anything is evicted), so it
//     evicts by the new watermark and the next batch drops late input by
//     it; when the watermark did not move it changes nothing, as Spark
//     runs none.
//
//   - count(*) counts rows, count(col) non-null values; sum, min, max and
//     avg skip nulls and give null for a group without a non-null value;
//     avg sums each value cast to a double; a BIGINT sum that leaves BIGINT
//     fails the batch in ANSI mode and wraps otherwise.
//
//   - Comparisons cast as Spark's ANSI coercion does: BIGINT with DECIMAL
//     exactly, BIGINT with DOUBLE as doubles, a string literal to the other
//     side's type, a DATE to a TIMESTAMP at midnight UTC; an IN list with a
//     DOUBLE compares as doubles.
//
//   - The output modes: update and complete leave every group in the
//     table; append over windows only the windows the final watermark
//     closed (window.end <= watermark, Spark's eviction predicate), each
//     once; complete over windows only the windows it has not closed
//     (ethstream's documented difference: Spark keeps them all).
//
//   - A deduplication (Dedup; dedup.go) before the aggregation, or before
//     the SELECT list of a query without one (Projection; project.go, in
//     append mode, the tables compared as multisets): Spark's
//     dropDuplicates / dropDuplicatesWithinWatermark as operator 0 after
//     the WHERE (ethstream's read path runs it first): late rows (event
//     time <= the previous batch's watermark) dropped, a stored key's rows dropped,
//     keys evicted at the end of each batch by the batch's watermark
//     (expiresAt = event time + delay, or the event-time key column).
//
//   - Columns of every other scalar type (types.go: BOOLEAN, TINYINT,
//     SMALLINT, INT, FLOAT, DECIMAL(12,2), DECIMAL(38,0) with values whose
//     sum overflows, DATE, BINARY, TIMESTAMP_NTZ), with nulls: group keys,
//     count/min/max/sum/avg inputs by Spark's result types, IS NULL and
//     comparisons with typed literals in WHERE (a decimal comparison in
//     Spark 4's wider decimal type), CAST(x AS STRING) group keys,
//     deduplication keys and projected columns.
//
//   - Session windows (Session; session.go): GROUP BY session_window(ts,
//     gap) and keys, the gap constant or a CASE of gap strings (a null,
//     zero or negative gap, or a null event time, gives the row no
//     session); a row whose own session ends at or before the previous
//     batch's watermark is late; per key, sessions sorted by start absorb
//     the next while it starts at or before their end, across batches;
//     append emits a session once the batch's watermark reaches its end
//     and forgets it, complete emits every session and evicts none, update
//     is refused (UNSUPPORTED_OUTPUT_MODE before any batch).
//
// Where Spark itself is inexact (the order of a double sum), Compare takes
// a relative tolerance.
package sparkref
