// Package files is Spark's file sink (FileStreamSink,
// `writeStream.format("parquet").option("path", dir)`): each batch's rows
// become a Parquet part file in dir, and the batch is committed by one file
// of the metadata log dir/_spark_metadata, which readers that honour it
// (Spark's FileStreamSource and batch reader, the file source of this
// repository) use as the list of committed files.
//
// # Metadata log
//
// A batch is committed by a file of Spark's FileStreamSinkLog, format v1,
// specified in package internal/sinklog, which reads the log for the sink
// and for the file source alike; every CompactInterval-th batch's file is a
// compact file.
//
// # Exactly once
//
// As Spark's FileStreamSink, a batch whose id is at most the newest id in
// the log is skipped: the engine re-runs the last uncommitted batch after a
// crash and the log says whether the sink already committed it. Part files
// of a batch that crashed before its log file exist on disk but are not
// listed; a log-honouring reader never sees them. Unlike Spark, whose part
// file names carry a random job id, a part file's name is derived from the
// query id and batch id, so the re-run replaces the orphan instead of adding
// a second copy beside it (a reader that lists the directory without the
// log then sees no duplicate either).
//
// Only append mode is supported, as in Spark: update and complete are
// refused with Spark's STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE.
package files
