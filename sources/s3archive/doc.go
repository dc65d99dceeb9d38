// Package s3archive is ethstream's file stream source: Spark's
// FileStreamSource over the AWS public blockchain dataset layout
//
//	<root>/v1.0/eth/blocks/date=YYYY-MM-DD/part-NNNNN-<uuid>-c000.snappy.parquet
//
// on S3 (aws-sdk-go-v2: the public bucket anonymously, any bucket with the
// default credential chain, any S3-compatible endpoint with path-style
// addressing) or on a local directory (file:///abs/path).
//
// # Admission
//
// LatestOffset lists the prefix (ListObjectsV2, paginated; or a directory
// walk), orders the data files by date partition then by URI, and admits up
// to maxFilesPerTrigger (and maxBytesPerTrigger) files it has never admitted
// before. Each admitted set is recorded in the source log under the source's
// metadata directory as log entry n, and the source's offset is
// {"logOffset":n}. ReadBatch(start, end] reads the files of log entries
// start+1..end from the log, never from a listing, so a re-run of a batch
// reads the same files in the same order. Files that appear later are
// admitted by later triggers; an admitted file is never admitted again, across
// restarts. Names starting with "_" or "." and files not ending in ".parquet"
// are ignored. With trigger availableNow, PrepareAvailableNow snapshots the
// listing and only files in the snapshot are admitted; the triggers of that
// run admit from the snapshot and do not list again (Spark's
// FileStreamSource does the same).
//
// # Source log format (version 1)
//
// The log is Spark's FileStreamSourceLog (a CompactibleFileStreamLog), byte
// for byte but for one additive field (size, below). Directory: <checkpoint>/sources/<key>/
// (stream.SourceEnv.MetadataDir). One file per log id n = 0, 1, 2, ...:
//
//	<n>           the entries admitted by log id n
//	<n>.compact   when (n+1) % interval == 0: every entry of log ids 0..n
//
// The compaction interval is Spark's
// spark.sql.streaming.fileSource.log.compactInterval default, 10, unless
// the directory already holds compact files; then it is derived from them
// as Spark does: with two or more, the distance between the newest two;
// with one, <c>.compact, c+1 if that is at most 10, else the smallest
// divisor of c+1 from 10 up when 10 < (c+1)/2, else c+1 (so a log Spark
// wrote with another interval, such as its own test log 2.compact, 3, 4 of
// interval 3, is continued in its layout).
//
// A file is the line "v1", then for each entry a newline and one JSON object
// (no trailing newline; a reader also accepts one newline after every line,
// as Spark 2.1 wrote):
//
//	v1
//	{"path":"s3://aws-public-blockchain/v1.0/eth/blocks/date=2026-09-30/part-00000-0b3c-c000.snappy.parquet","timestamp":1790812800000,"batchId":3,"size":52947}
//	{"path":"s3://aws-public-blockchain/v1.0/eth/blocks/date=2026-10-01/part-00000-7a1e-c000.snappy.parquet","timestamp":1790899200000,"batchId":3,"size":52960}
//
// Fields: path is the object's URI, URL-encoded as by net/url (a space is
// %20; "=" and "/" stay); timestamp is its last-modified time in ms since the
// Unix epoch; batchId is the log id that admitted it (every entry of <n> has
// batchId n; a compact file holds every batchId 0..n and at least one equal to
// n); size (ethstream's, checkpoint.FileEntry) is its size in bytes as listed
// when admitted, absent in logs written before it and in Spark's (Spark's
// reader ignores it). A moved archive is checked against it (move.go). Entries are in admission order: date partition, then URI. Files are
// parsed by package checkpoint's FileStreamSourceLog parser (the one
// `checkpoint inspect` uses), so both agree on what is well formed.
//
// Every file is published through the checkpoint's primitive
// (checkpoint.Publish: package durable, NoOverwrite, through
// stream.SourceEnv.FS): written to ".<name>.<hex>.tmp", fsynced, closed,
// hard-linked to its final name (which fails if the name exists, so two
// writers cannot both publish log id n), the temp name removed and the
// directory fsynced; on S3 a PUT with If-None-Match: *. Files are never
// overwritten. If log id n
// already exists when LatestOffset is asked for the batch after n-1, the
// previous run admitted it and crashed before the engine recorded the batch:
// the entry is re-used, so LatestOffset is idempotent.
// Stale temp files are removed on Open. A missing version line, a version
// other than v1 (a newer one is refused), a line that is not a JSON object
// with path, timestamp and batchId, a wrong batchId, an empty file, a gap in
// the ids from the newest compact file on, a file of the wrong form for the
// interval or a foreign file name (any but moves/, the move records of
// move.go) is a CHECKPOINT_CORRUPT error naming the file; the source never
// resets its log.
//
// # Pruning (Spark's deleteExpiredLog)
//
// After log id n is published the source deletes old files exactly where
// Spark's CompactibleFileStreamLog.deleteExpiredLog does (with
// spark.sql.streaming.fileSource.log.deletion at its default, true): with
// retain = the query's spark.sql.streaming.minBatchesToRetain
// (stream.SourceEnv.MinBatchesToRetain, default 100) and m = n+1-retain,
// nothing when interval > m; otherwise every file with an id below
// b = m - m%interval - 1, the newest compact id below m. So the newest
// compact file and every file after it are never deleted, at least retain
// ids keep their own files (each query batch advances the source by at
// most one id, so these cover every source offset the retained offset log
// can name), and the directory holds at most retain+interval files however
// long the query runs. Files are deleted lowest id first; the directory is
// listed only when a file below b may exist (once per interval ids). A
// crash midway, or between publishing a compact file and deleting, leaves
// old files that no reader needs (reading starts at the newest compact
// file) and the next admission deletes them; a failed delete is logged and
// retried likewise, never failing the batch. One difference from Spark:
// Spark deletes only files older than
// spark.sql.streaming.fileSource.log.cleanupDelay (10 minutes), a guard
// for S3's former eventually consistent listing in which a reader could
// miss the new compact file; S3 listing is strongly consistent now and the
// retained window is at least retain ids, so files are deleted at once.
//
// Open reads the newest compact file and the files after it (at most
// interval files whatever the log's length) to rebuild the set of admitted
// files; ReadBatch reads <n> or <n>.compact for each n of the batch, and
// for an id whose file was pruned takes its entries from what the newest
// compact file holds (Spark's FileStreamSourceLog.get does the same).
//
// Offsets are Spark's FileStreamSourceOffset: {"logOffset":n}; a bare n is
// also accepted on input.
//
// # Reading
//
// For each file the source fetches a tail (the footer and the last row
// group's last columns, read speculatively; more if the footer is larger):
// over S3 128 KiB for the first files, then the tail the files before
// needed and a margin (tail.go), then only the byte ranges of
// the projected column chunks not already in that tail, merging ranges that
// touch or lie at most 128 KiB apart (so between two projected chunks at
// most 128 KiB of unprojected chunks are downloaded, besides the speculative
// tail: one request saved costs more than that many bytes; in a daily blocks
// file read for timestamp, number and miner it bridges the ~62 KB from the
// first row group's miner to the second's timestamp, 4 requests per file ->
// 3). Those are S3's figures; a file:// archive reads a 16 KiB tail (a daily
// file's footer is ~8 KiB), bridges holes of at most 16 KiB, opens the file
// once per decode and reads its ranges one after the other (a local read is
// a syscall and a copy: bytes nothing decodes cost more than a request).
// Either way the ranges are read into buffers the decode worker hands from
// file to file (over S3 through storage.Objects.GetRangeInto), and pages are
// decoded with parquet-go's page API into columnar engine batches: one
// batch per row group, in log order then row-group order. Parallelism files are fetched
// and decoded at once, by long-lived workers, up to 2 x Parallelism files
// ahead of emission. A batch of fewer files than Parallelism (a day of the
// transactions table is one file of 11 row groups) is read by row group
// instead, without skipUnreadable: its files are opened and (over S3) their
// chunks fetched at once, then the row groups decode on the workers (from
// a local file, reading their chunks as they decode them; at most
// GOMAXPROCS workers, as decoding them is CPU alone), as many ahead of
// emission (a window of one more with the one being emitted), each
// emitted as soon as those before it are (split.go). The source knows no column of its own: its caller
// configures the files' schema (Options.Columns, which is Source.Schema;
// for the blocks table the pipeline wires package ethblock's). Columns are
// matched by their file name per file (engine block_ts is the archive's
// timestamp), the projected ones only, and may drift between files: a
// missing column not configured Required (for blocks: other than number,
// hash, parent_hash, timestamp and miner) becomes nulls (base_fee_per_gas in files before the London
// day's, withdrawals_root before Shanghai's); optional columns keep their
// nulls; INT96 and INT64 timestamps (millis, micros, nanos; unannotated
// integers by magnitude), by the one table of package columnar, whose
// decoder this source uses; INT32, INT64, DOUBLE and DECIMAL integers; DOUBLE,
// FLOAT, INT32, INT64 and DECIMAL for the double columns (difficulty,
// total_difficulty); dictionary or plain encodings; hashes and other hex
// strings as strings or as fixed-length binary (rendered 0x-hex). The
// strings of a page or a dictionary share one allocation; the rows of a
// dictionary-encoded chunk share its strings, and miner strings of plain
// pages are interned, so that equal miners of a batch are equal pointers.
//
// An S3 archive is read through storage.Objects, the object layer the
// checkpoint and the table use too: its one error classification, and its
// retries (up to 10 attempts, full-jitter exponential backoff from 25 ms)
// sleeping on the engine's clock (a manual clock in a test must be
// advanced for a retry to proceed), on 503 SlowDown, 429, 5xx, timeouts and
// connection errors; the AWS SDK's own retryer is off so that every attempt
// is counted. A file:// archive is read through Options.FS (the local disk
// unless a test injects faults). Metrics() reports filesListed, filesAdmitted,
// pendingFiles, filesRead, rowsRead, bytesRead, requests, retries,
// throttles, decodeMs (summed over decode workers), skippedFiles and skipped.
// ReportLatestOffset is the newest admitted log offset (files not yet
// admitted cannot have an offset; they are counted as pendingFiles).
//
// # Errors
//
// A truncated or non-Parquet object, a missing required column (number,
// hash, parent_hash, timestamp, miner, when projected), an unsupported
// column type, a decoder failure on damaged pages, or an unreadable bucket
// or object is an ARCHIVE_FILE_UNREADABLE error
// naming the object. The batch fails; after the cause is fixed it re-runs
// identically. With skipUnreadable=true such files are skipped instead and
// listed in Metrics() (skippedFiles, skipped). A store that keeps failing
// transiently past the retry budget is STORAGE_UNAVAILABLE, and missing or
// refused credentials STORAGE_CREDENTIALS (package storage): never a
// skipped file.
//
// # README: backfilling from the public dataset
//
// The AWS public blockchain dataset lives in us-east-2 and is readable
// without credentials:
//
//	ethstream run --checkpoint ./ckpt --table ./table \
//	  --conf spark.sql.streaming.queryEvolution.enableSourceEvolution=true \
//	  --source 's3_backfill=s3archive:s3://aws-public-blockchain/v1.0/eth/blocks?region=us-east-2&anonymous=true&maxFilesPerTrigger=5' \
//	  --trigger available-now
//
// Against the embedded endpoint (ethstream serve-s3 --root DIR) add
// endpoint=http://127.0.0.1:9000 (path-style addressing is then implied).
// Without anonymous=true the default AWS credential chain (environment,
// shared config, instance role; no instance role when endpoint= names a
// server) signs the requests. To read a local copy:
// s3archive:file:///abs/path/v1.0/eth/blocks?maxFilesPerTrigger=5.
package s3archive
