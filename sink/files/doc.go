// Package files is Spark's file sink (FileStreamSink,
// `writeStream.format("parquet").option("path", dir)`): each batch's rows
// become a Parquet part file in dir, and the batch is committed by one file
// of the metadata log dir/_spark_metadata, which readers that honour it
// (Spark's FileStreamSource and batch reader, the file source of this
// repository) use as the list of committed files.
//
// # Metadata log (format v1, Spark's FileStreamSinkLog)
//
// One file per batch id, _spark_metadata/<batchId>, written once with
// durable's put-if-absent publish: the line "v1", then for each part file
// "\n" and one JSON object (Spark's SinkFileStatus), no final newline:
//
//	v1
//	{"path":"file:/out/part-00000-….snappy.parquet","size":1234,"isDir":false,"modificationTime":1700000000000,"blockReplication":1,"blockSize":33554432,"action":"add"}
//
// path is the file's URI, as Hadoop's Path.toUri prints it ("file:/dir/…"
// for the local disk). Every CompactInterval batches (Spark's
// spark.sql.streaming.fileSink.log.compactInterval, default 10) the batch
// whose id n has (n+1) % interval == 0 is written as <n>.compact instead,
// holding every entry of the newest earlier compact file and of the batches
// since, then its own, minus entries whose action is "delete"; a reader
// reads the newest compact file and every batch file after it. A batch
// without rows is committed by a file holding "v1" alone.
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
