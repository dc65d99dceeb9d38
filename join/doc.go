// Package join is the stream-stream join, Spark's
// StreamingSymmetricHashJoinExec (operator name "symmetricHashJoin"): a
// stream.SideOperator over the same state store (package state) as the
// other stateful operators, the first stage of a two-input query
// (engine.Query.Sides).
//
// # Rule
//
// Inner, LeftOuter, RightOuter, FullOuter and LeftSemi joins on equi-join
// keys plus an optional time-range condition (a conjunction of Bounds,
// left.ts + c1 OP right.ts + c2), in append mode. A row of one side that
// the previous batch's watermark has passed on its side's event-time
// column (ts <= watermark; the watermark Process gets) is dropped and
// counted (numRowsDroppedByWatermark), as Spark 3.4+'s
// getInputWatermarkForLateEvents; every other row is joined with the rows
// of the other side stored with its key (each pair satisfying the
// condition is emitted once: when the later of the two arrives), marks
// those rows matched, and is stored itself with its matched flag, unless
// the batch's own state watermark predicate of its side (below, at the
// watermark EvictionWatermark gave) already removes it: Spark's
// OneSideHashJoiner does not add such a row, so it never matches a later
// row and, unmatched on an outer side, is never emitted with nulls. A left
// semi join emits a left row once, on its first match, and keeps no
// matched left row; a right row emits the stored left rows not matched
// yet. A row whose key has a null matches nothing: on a side the join
// never emits alone it is dropped (Spark's inferred isnotnull filter),
// on a preserved (outer) side it is stored and emitted with nulls when
// evicted.
//
// Eviction (Spark's StreamingSymmetricHashJoinHelper), at Finish with the
// batch's watermark W: when an equi-join key is a side's watermark column,
// the rows of both sides whose key is at or before W; otherwise a side
// with a watermark of its own evicts its rows whose event time is at or
// before its state value watermark, computed from the condition's bounds
// on it by the other side's watermark column: min over such bounds of
// W + c (−1 ms for a non-strict bound), with Spark's arithmetic
// (StreamingJoinHelper.getStateValueWatermark). An evicted row of a
// preserved side that never matched is emitted with nulls for the other
// side's columns. Spark's checker rules decide which joins run at all
// (checkSupported): an outer or semi join needs a watermark in the join
// keys or a state value watermark on its preserved side, else
// _LEGACY_ERROR_TEMP_3102 with Spark's message; an output mode other
// than append is refused the same way (CheckOutputMode).
//
// # State layout (format 3; Spark's stateFormatVersion 2)
//
// One state.Store (state/<opId>) holds Spark's four stores per partition
// as rows of one schema, told apart by the first two key columns:
//
//	key:   side string ("left" | "right"), store string
//	       ("keyToNumValues" | "keyWithIndexToValue"), the join key columns
//	       (named as on the left side; Int64 and Timestamp nullable; Int32,
//	       Date and Boolean keys held as Int64), index int64 nullable (null
//	       in keyToNumValues)
//	value: value string, whose bytes are, in formats 2 and 3:
//	       keyToNumValues       0x02, the count (uvarint)
//	       keyWithIndexToValue  0x02, flags (bit 0: matched), a null bitmap
//	                            of ceil(columns/8) bytes (bit j%8 of byte
//	                            j/8: column j is null), then each non-null
//	                            column in the side's order by its storage
//	                            with the state's value encodings: integer
//	                            storages (Int64, Timestamp µs, Boolean 0/1,
//	                            Int32, Date) a zig-zag varint, doubles 8
//	                            bytes little-endian, strings and binary a
//	                            uvarint length and the bytes
//
// Example: a right row (k "a", ts 1709294405000000, n null) not matched
// yet is the string 02 00 04 01 61 80 ed 9c dd 83 a6 89 06 (stored after
// its length, 0d): the tag, the flags, the bitmap with column 2 null, "a",
// the timestamp.
//
// Format 1 (spec "join/v1", main before format 2) held the same rows with
// JSON text values: {"value":<count>}, and the row as a JSON object of the
// side's columns in order (timestamps in µs, a NaN or infinite double as a
// string) plus "matched":true|false. Its text starts with '{', a format-2
// value with 0x02, so each value says its format: a format-1 state keeps
// reading (the state schema's spec "join/v1" is accepted for the same
// join, the next commit records "join/v3"), and its rows are rewritten in
// format 2's encoding as the join writes them. The format-2 spec starts
// "join/v2 fields=" (format 3's "join/v3 fields=") and the JSON of each
// side's columns (state.Field), by
// which `ethstream state dump` renders a format-2 or 3 value as the text
// format 1 stored (dump.go), so a dump reads the same in every format.
// The format-2 text's names and strings are quoted as JSON quotes them
// (format 1 quoted names with strconv.Quote, not JSON for DEL), and a
// format-1 value is read by position (a repeated column name read its last
// value into both columns before). Format 2 keeps a BINARY column's bytes
// as they are (format 1 refused a string that was not UTF-8).
//
// A side's value columns are its Schema's, or, when Side.Columns prunes
// it, the columns the query reads plus the keys, the watermark and the
// range columns (the spec records which). A state recorded with more
// columns than the query reads (every column, before pruning, or a query
// that read more) keeps its recorded layout (Operator.Open, stored.go),
// and the rows carry the columns the query reads; a state that lacks a
// column the query reads is STATE_SCHEMA_MISMATCH at Open, naming it.
//
// A key with n stored rows has keyWithIndexToValue indexes 0..n-1, and,
// in format 3 (spec "join/v3 fields="), keyToNumValues n only when n >= 2:
// a key holds one row most often (a block hash joined with its child),
// and its count was half the state's writes and deletes. A key without
// keyToNumValues holds one row if index 0 exists, else none. Format 2
// (spec "join/v2 fields=", otherwise the same) stored keyToNumValues for
// every key; a format-2 state keeps reading (its spec is accepted for the
// same join, the next commit records "join/v3") and a key's count of one
// is deleted when its rows next change. A binary that knows format 2 at
// most refuses a format-3 state (STATE_SCHEMA_MISMATCH) rather than read
// its keys of one row as empty. An eviction compacts the survivors to
// indexes 0..m-1. The state schema's spec records the join type, each
// side's keys and each side's value columns with their types: a restart
// that changes any of them is STATE_SCHEMA_MISMATCH at Open, as Spark's
// state schema check refuses it. `ethstream state dump --op N` prints the
// rows with these columns,
// so a join's side and store are the first two. The operator keeps no
// record of its own (state.Store.OperatorRecord is empty), so the state
// package's offline repartition and state dump read it as any other
// operator's, and a repartition keeps every row.
//
// # Memory
//
// The operator reads a key's rows once (keyrows.go), changes them in
// memory through the batch and writes each changed value, the indexes an
// eviction emptied and the changed count once at Finish. Between batches
// it keeps each side's rows in memory while a side holds at most
// memRowsCap of them (a key not held then has no rows, and costs no
// read), and, on a side that evicts, an index of its rows by the column
// eviction compares (evictindex.go): eviction visits the keys of the rows
// at or below its limit instead of decoding every stored row (the
// no-data check needs no state: it runs whenever a side evicts). Both are
// loaded by one scan of the side's values when first needed, and dropped
// by Abort and whenever the store's version is not the one they reflect
// (a failed batch, a repartition, a reopen); memory never decides what
// the state holds.
package join
