// Package sinklog is the metadata log of Spark's file sink
// (FileStreamSinkLog), the list of the part files a file sink committed in
// its output directory: its format, the codec the sink (sink/files) writes
// it with, and the reader Spark's CompactibleFileStreamLog.allFiles is,
// which the sink and the file source (sources/files) both read it with.
//
// # Format v1
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
package sinklog
