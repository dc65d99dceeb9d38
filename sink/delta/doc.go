// Package delta implements the Delta Lake transaction protocol (reader
// version 1, writer version 2, no table features) for local directories, and
// the sink of every query's output (docs/contracts.md, Delta table), one
// commit per batch carrying txn {appId: query id, version: batch id}: an
// idempotent MERGE in output mode update; in output modes append (and for a
// query with no stateful operator, stream.SinkEnv.Append) and complete,
// Spark's DeltaSink: a STREAMING UPDATE commit that appends the batch's
// files, or replaces every live file with them (append.go).
// Every file of a table is read and written through a pebble vfs.FS
// (SinkOptions.FS, OpenFS, WithFS; the local disk by default).
//
// # On-disk format (Delta protocol, as written by Spark)
//
//	<table>/
//	  part-00000-<uuid>-c000.snappy.parquet   data files (never overwritten)
//	  _delta_log/
//	    00000000000000000000.json             commit v0 (20-digit, contiguous)
//	    00000000000000000010.checkpoint.parquet  classic checkpoint every 10 commits
//	    _last_checkpoint                      {"version":10,"size":N,"sizeInBytes":B,"numOfAddFiles":F}
//	    .00000000000000000011.json.<hex>.tmp    a commit being published (ignored by readers)
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
// with DELTA_UNSUPPORTED_PROTOCOL. Data files are read by column name
// through package columnar's decoder and its one table of conversions
// (INT96 and INT64 milli/micro/nano timestamps, INT32, FLOAT and DECIMAL
// columns); partition values come
// from the log; columns a file lacks read as null. Stats are read from the
// JSON string or from a checkpoint's typed stats_parsed.
//
// # Writing
//
// Every file is published by package durable. Commits are put-if-absent
// (NoOverwrite): the actions are written to a temp file in _delta_log,
// fsynced, and hard-linked (link(2)) to the final name; EEXIST means another
// writer took the version, and the writer re-reads the log and retries (or
// stops if its txn is already there). Rename is never used for commits
// because it overwrites on POSIX. Data files are published the same way
// under new UUID names (".part-...parquet.<hex>.tmp" while written), so a
// partial data file is never visible either. Checkpoints and
// _last_checkpoint are derived data: they are written to a temp file,
// fsynced and renamed over (Replace; racing writers produce the same
// content).
//
// Temp files are hidden names ending in ".tmp" (durable.IsTemp). Writers may
// share a table, so a sink deletes only those in the root and _delta_log
// older than one hour (by its clock, against the file's modification time)
// when it opens: a younger one may be another writer's publish in progress.
//
// Every commit this package writes starts with commitInfo (timestamp,
// operation, operationParameters, readVersion, isolationLevel,
// isBlindAppend, operationMetrics as strings, engineInfo
// "ethstream/<version>", txnId). Version 0 (Create) holds commitInfo
// "CREATE TABLE", protocol {1,2} and metaData (uuid id, parquet format,
// schemaString, partitionColumns, configuration, createdTime).
//
// # MERGE (MergeSink)
//
// One commit per engine batch:
//
//	{"commitInfo":{..."operation":"MERGE","operationParameters":{"predicate":"[\"(t.window.start = s.window.start) AND ... AND (t.miner <=> s.miner)\"]",
//	   "matchedPredicates":"[{\"actionType\":\"update\"}]","notMatchedPredicates":..},
//	   "readVersion":v,"isolationLevel":"Serializable","isBlindAppend":false,
//	   "operationMetrics":{"numSourceRows":"20",...},"engineInfo":"ethstream/0.1.0","txnId":..}}
//	{"txn":{"appId":"<query id>","version":<batch id>,"lastUpdated":ms}}
//	{"remove":{"path":..,"deletionTimestamp":ms,"dataChange":true,"extendedFileMetadata":true,
//	   "partitionValues":{},"size":N,"stats":"{\"numRecords\":N}"}}   per rewritten file
//	{"add":{"path":..,"partitionValues":{},"size":N,"modificationTime":ms,"dataChange":true,
//	   "stats":"{\"numRecords\":..,\"minValues\":{\"window\":{\"start\":..}..},..}"}} per new file
//
// A row with Sign -1 (stream.Batch.Signs: a group emptied by retractions)
// is a deletion: WHEN MATCHED AND s.sign = -1 THEN DELETE. The file holding
// its key is removed and rewritten without it (a file left empty is only
// removed), a deletion of an absent key changes nothing, and such a commit
// records matchedPredicates
// [{"predicate":"(s.sign = -1)","actionType":"delete"},{"actionType":"update"}]
// with numTargetRowsDeleted and numTargetRowsMatchedDeleted filled in.
//
// The MERGE key is the output schema's key (stream.Schema.Key: the window
// and the group columns; SinkOptions.KeyColumns overrides it), for the
// reference table and every query's table alike: one columnar MERGE
// (rowset.go, merge.go). Keys match null-safely, as Spark's <=>: a null key
// column equals a null (and NaN equals NaN, -0 equals 0), so a group whose
// key is null is one row of the table, updated and deleted like any other.
// The predicate shows a key column the output declares nullable as
// "(t.c <=> s.c)" and a non-nullable one as "(t.c = s.c)" (the same match
// there); tables written before keys matched null-safely show "=" for every
// column in their older commits and keep working unchanged. A matched
// target row takes the batch row's values. An output without a key (a
// global aggregation) has one empty key: its table holds one row.
//
// A batch is skipped when the snapshot's txn version for the query id is
// already >= the batch id (Spark's rule), so a re-run batch writes nothing.
// Candidate files are the live files whose stats may hold a batch key
// (prune.go): for every key column its min and max (timestamps' max widened
// by 1 ms for the millisecond cut; strings 32-character prefixes, a
// truncated max followed by U+10FFFF; NaN and infinities always admitted)
// and its nullCount (a null key only in a file with nulls there). They are
// read, and only those that really hold one are removed and rewritten with
// the updated rows. All output rows (copied, updated and inserted) are
// sorted by key and cut into files of TargetFileRows rows; in a windowed
// table, when the last file would be large, the newest window goes to a file
// of its own ("hot tail"), so that the next live batch rewrites a few
// hundred rows, not a full file. A lost race abandons (deletes) the attempt's data files,
// applies the new commits to the cached snapshot and retries from the txn
// check. A checkpoint follows every commit whose version is a multiple of
// CheckpointInterval: its rows are taken at the commit, and the file is
// written after it by the sink's maintenance goroutine (Delta's post-commit
// checkpoint hook), off the batch's path; one still queued when the next is
// due is replaced by the newer. Its failure is logged, not fatal (the
// commit is durable; a missing checkpoint only slows replay).
//
// Crash safety: data files are published (fsynced and linked) under new UUID
// names, and their directory is fsynced while the commit's temp file is
// fsynced; only then is the commit linked into place, and the log directory
// fsynced. A crash before
// the link leaves orphan data files and a temp file that no reader looks at;
// the engine re-runs the batch, and Vacuum deletes the orphans after the
// retention.
//
// # Maintenance
//
// Optimize compacts runs of small files (in window order) of any table the
// sink writes (the window struct and nullable long, double, string and
// timestamp columns, unpartitioned; its layout is read from the table's
// schema) into files of TargetFileRows rows sorted by every column in table
// order (the key first): one commit, operation OPTIMIZE, every add and remove
// dataChange=false; any other table is DELTA_UNSUPPORTED_FEATURE. Vacuum deletes files under the root (not
// in _delta_log or hidden/underscore directories) that the latest snapshot
// neither references nor removed within the retention, and that are older
// than the retention; it is a dry run unless asked. History lists commitInfo
// per version, newest first. Show prints any table as CSV or JSON lines.
//
// Auto-maintenance (delta.autoOptimize.autoCompact; on unless the table
// property is "false", or SinkOptions.AutoCompactMinFiles < 0): after a
// committed batch, if at least 50 files (minNumFiles) other than the 8
// newest hold fewer than TargetFileRows/16 rows, the MergeSink compacts them
// in the background with an Optimize of those files only (operationParameters
// auto=true, every action dataChange=false), so a live query that adds a
// file per batch keeps about 60 live files plus one per TargetFileRows of
// closed windows. After such a compaction, at most every half
// delta.deletedFileRetentionDuration (default 7 days), it vacuums the files
// removed longer ago than that retention (at most 128 files a run; a run
// that reaches the bound is continued by the next maintenance, so weeks of
// owed deletes never come as one burst), and cleans up expired log entries
// as Delta does (delta.logRetentionDuration, default 30 days; off with
// delta.enableExpiredLogCleanup=false): with cp the newest checkpoint older
// than the retention, the commits and checkpoints below cp are deleted,
// oldest first, at most 128 a run, so the log always starts at a checkpoint and every version
// from cp on still reads. These are ordinary commits and
// deletions: a crash leaves at most unreferenced files for a later vacuum,
// and a failure is logged without failing the batch. The OPTIMIZE commit is
// published under the sink's lock, so a batch's MERGE never loses its
// version to it; a version taken meanwhile (by the sink's batches or by
// another writer) is no conflict unless its commit removed a file the
// OPTIMIZE read, and the same actions are then committed at the next free
// version (Delta's rule for a dataChange=false compaction); otherwise the
// OPTIMIZE starts over. Maintenance runs one job at a time, in order; what
// finished since the previous batch is reported in the next batch's sink
// metrics (milliseconds and counts): deltaCheckpointMs,
// deltaCheckpointVersion, autoCompactMs, autoCompactFilesRemoved,
// autoCompactFilesAdded, vacuumMs, vacuumFilesDeleted, logCleanupMs,
// logCleanupEntriesDeleted.
//
// # Errors
//
// User-facing failures are *errcode.Error with the codes in errors.go
// (DELTA_CORRUPT_LOG, DELTA_VERSION_GAP, DELTA_MISSING_FILE,
// DELTA_UNSUPPORTED_PROTOCOL, ...) and the path concerned. A scan checks
// that every live file exists before returning any row.
//
// # Concurrency
//
// Table is safe for concurrent use. A Snapshot from Table.Snapshot is
// immutable. MergeSink serialises its own calls; any number of writers (in
// one process or several) may share a table directory.
//
// # Tables of any query (outschema.go, datafile.go)
//
// The table's schema comes from the operator's output schema (SinkEnv.Schema,
// TableSchema): window_start and window_end become the struct column
// window<start timestamp, end timestamp> where window_start stood, every
// other column keeps its name with the Delta type of its column type
// (int64 long, float64 double, string string, timestamp timestamp), all
// nullable; the MERGE key is the schema's key (the window and the group
// keys). A row with sign -1 deletes its key. Data files are snappy parquet,
// every field OPTIONAL, timestamps INT64 TIMESTAMP(MICROS, UTC), rows sorted
// by the key, written and read one column at a time (datafile.go); each add
// carries stats for every column, keys in schema order (numRecords;
// minValues and maxValues per column, nested like the schema, timestamps cut
// to milliseconds, strings to 32 characters, NaN and infinities left out, a
// column without values left out; nullCount per column, always). Tables
// written before this order recorded the keys of minValues, maxValues and
// nullCount alphabetically; JSON readers, ours included, do not care. An
// existing table whose schema differs from the output's is refused with
// DELTA_SCHEMA_MISMATCH naming both. Snapshot.Scan reads any such table
// as engine batches, one per file; Show prints it.
//
// The sink has no schema of its own: a table's comes from the rows the
// sink is given (the operator's output, SinkEnv.Schema, or
// SinkOptions.Schema), and Open without one is DELTA_SINK_SCHEMA_REQUIRED.
// The reference query's output makes the reference table, with Spark's schema
// (SinkSchemaString): window struct<start timestamp, end timestamp>, source
// string, miner string, count long, keyed by (window, source, miner). Its
// parquet files are snappy-compressed, every field OPTIONAL, timestamps
// INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true), and rows are sorted by
// (window.start, window.end, source, miner) so that the files' min/max stats
// on window.start prune MERGE. Its data files and stats are byte for byte
// those of the typed writer this MERGE replaced.
package delta
