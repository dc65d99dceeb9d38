// Package delta implements the Delta Lake transaction protocol (reader
// version 1, writer version 2, no table features) for local directories, and
// the idempotent MERGE sink of the reference pipeline (DESIGN.md §9).
//
// # On-disk format (Delta protocol, as written by Spark)
//
//	<table>/
//	  part-00000-<uuid>-c000.snappy.parquet   data files (never overwritten)
//	  _delta_log/
//	    00000000000000000000.json             commit v0 (20-digit, contiguous)
//	    00000000000000000010.checkpoint.parquet  classic checkpoint every 10 commits
//	    _last_checkpoint                      {"version":10,"size":N,"sizeInBytes":B,"numOfAddFiles":F}
//	    .00000000000000000011.json.<uuid>.tmp   a commit being published (ignored by readers)
//
// A commit is newline-delimited JSON, one single-key action per line:
// commitInfo first, then txn, remove, add (and protocol/metaData in v0).
// Only names matching ^\d{20}\.json$ are commits.
//
// # Reading
//
// Table.Snapshot replays the newest classic checkpoint at or below the
// wanted version, then every later JSON commit in order (a missing version
// is DELTA_VERSION_GAP). The last protocol and metaData win, the last txn
// per appId wins, and add/remove replace each other by percent-decoded path.
// Protocols above reader 1 / writer 2, or with table features, are refused
// with DELTA_UNSUPPORTED_PROTOCOL. Data files are read by column name; INT96
// and INT64 (milli/micro/nano) timestamps are accepted; partition values come
// from the log; columns a file lacks read as null. Stats are read from the
// JSON string or from a checkpoint's typed stats_parsed.
//
// # Writing
//
// Commits are put-if-absent: the actions are written to a temp file in
// _delta_log, fsynced, and hard-linked (link(2)) to the final name; EEXIST
// means another writer took the version, and the writer re-reads the log and
// retries (or stops if its txn is already there). Rename is never used for
// commits because it overwrites on POSIX. Checkpoints and _last_checkpoint
// are derived data: they are written to a temp file, fsynced and renamed
// over (racing writers produce the same content).
//
// The sink table has Spark's schema (SinkSchemaString): window
// struct<start timestamp, end timestamp>, source string, miner string,
// count long. Its parquet files are snappy-compressed, every field OPTIONAL,
// timestamps INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true), and rows are
// sorted by (window.start, window.end, source, miner) so that the files'
// min/max stats on window.start prune MERGE.
package delta
