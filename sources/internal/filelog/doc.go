// Package filelog is the machinery every file stream source shares (the
// AWS-layout archive of package s3archive and the parquet, json and csv
// sources of package files): Spark's FileStreamSource log under the
// source's metadata directory (Log: <n> and <n>.compact files, Spark's
// compaction interval and deleteExpiredLog pruning), its offsets
// ({"logOffset":n}), and the admission rule that picks the files of the
// next log id from a listing (Admit). The format is specified in package
// s3archive's doc comment (Source log format, version 1); it is Spark's
// FileStreamSourceLog byte for byte plus an additive size field.
package filelog
