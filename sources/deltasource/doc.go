// Package deltasource is Delta Lake's streaming source (DeltaSource: Spark's
// spark.readStream.format("delta").load(path) / .table(name)) over one
// table on the local disk or S3, spelled --source NAME=delta:LOCATION?OPTIONS.
//
// # Offsets
//
// The source keeps no log of its own: the table's _delta_log is the log.
// Its offset is Delta's DeltaSourceOffset, byte for byte as Spark writes it
// to the offset log:
//
//	{"sourceVersion":1,"reservoirId":"<metaData.id>","reservoirVersion":N,"index":I,"isStartingVersion":B}
//
// With isStartingVersion true the offset is in the initial snapshot at
// version N (its live files numbered 0.. in (modificationTime, path)
// order); otherwise in commit N (its add actions with dataChange=true,
// numbered in commit order). index -1 is before the version's first file.
// When a batch's last file is the last of its version (or of the
// snapshot), the end offset is (N+1, -1, false). Offsets of sourceVersion 1
// to 3 are read; the schema-tracking barrier indexes (-20, -19) are
// refused. A reservoirId other than the table's (the table was replaced
// under the same path) is DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE.
//
// # Admission
//
// A first start with no starting option reads the snapshot at the latest
// version, then each later commit in order; startingVersion (a number or
// latest) or startingTimestamp (the first commit written at or after it,
// by the commit files' modification times) skip the snapshot. A batch
// admits up to maxFilesPerTrigger files (default 1000) and, when
// maxBytesPerTrigger is set, stops after the file that reaches it (a soft
// cap). A batch never spans the end of the initial snapshot, so that a
// batch without a start offset is re-read from the snapshot its end names
// (Delta's getBatch rule: the end's version, or the one before). Commits
// that add no data (OPTIMIZE's dataChange=false rewrites, metadata) emit
// nothing; the offset stays before them until a later commit adds data.
//
// A commit that removes data (remove with dataChange=true) is refused
// unless an option says otherwise: a delete (removes only) is
// DELTA_SOURCE_IGNORE_DELETE unless ignoreDeletes, ignoreChanges or
// skipChangeCommits; an update, merge or overwrite (removes and adds) is
// DELTA_SOURCE_TABLE_IGNORE_CHANGES unless skipChangeCommits (the commit
// is skipped) or ignoreChanges (its added files are emitted: rows may
// repeat). A metaData action whose schema the query's schema cannot read
// (a column it lacks, a type that differs) is DELTA_SCHEMA_CHANGED; a
// restart reads with the table's latest schema, so an additive change is
// picked up by restarting. Tables that need a reader protocol above 1 or
// reader features, column mapping, or deletion vectors are refused naming
// the feature. A commit gone from _delta_log (log retention) is
// DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE.
//
// # Reading
//
// The initial snapshot is replayed by package delta (sink/delta: JSON
// commits and classic Parquet checkpoints), so tables written by Spark,
// delta-rs and ethstream read alike. Data files are decoded by package
// pqcol (the projected top-level columns); partition columns come from
// the add action's partitionValues. Column types: every Delta primitive
// as the engine column of the same Spark type; an array of a primitive as
// an Array column; a struct of primitives as one column per field, named
// by its path (the Delta sink's window<start, end> reads as window.start
// and window.end). Maps, arrays of complex types and deeper nesting are
// refused (UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE). Files are read whole, Parallelism at a
// time, in stream order.
package deltasource
