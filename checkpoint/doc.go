// Package checkpoint reads and writes ethstream's checkpoint directory: the
// durable record of a streaming query (docs/contracts.md, Checkpoint). Its
// layout and formats are Spark Structured Streaming's, byte for byte where
// Spark has the file: a checkpoint Apache Spark wrote reads here (its logs;
// see Foreign state), and the offsets, commits and metadata files written
// here read in Spark. They are versioned and never change incompatibly. Every
// file is read and written through a pebble vfs.FS so that tests can inject
// crashes.
//
// # Layout
//
// Every artifact of a checkpoint, and the package that specifies it:
//
//	<ckpt>/metadata              {"id":"<uuid>"}: the query id, written once (here)
//	<ckpt>/offsets/<batchId>     write-ahead log of planned batches, v1 or v2 (here)
//	<ckpt>/commits/<batchId>     batch completion log, v1 (here)
//	<ckpt>/sources/<key>/        per-source private logs; key = name (V2) or position (V1):
//	    <n>, <n>.compact           a FileStreamSource log (here; sources/s3archive)
//	    history.<block>.<hash>.json  the ethrpc source's history (sources/ethrpc)
//	<ckpt>/state/<opId>/...      state store files (package state)
//	<ckpt>/shape/<seq>           the query's recorded shape, v2 or v1 (package shape)
//	<ckpt>/progress/<n>.jsonl    the progress log: StreamingQueryProgress JSON lines (informational)
//	<ckpt>/progress.jsonl        the progress log of format 1 (read, never written)
//	<ckpt>/.lock                 empty file locked while a query runs; on S3 the
//	                             lease .lock/<generation> (package storage)
//	<ckpt>/copy-in-progress      a checkpoint copy's destination until its last file
//	                             is verified (package relocate; CopyMarkerFile)
//
// <batchId> is a non-negative decimal integer without leading zeros. Names in
// offsets/ and commits/ that are not batch ids are ignored, except temporary
// files (see Publishing), which are deleted when a writer opens the checkpoint.
//
// # Numbered logs
//
// offsets/, commits/, shape/, a file source's log and the ethrpc history are
// each a Log: a directory of files written once, one per key, as Spark's
// HDFSMetadataLog. The Log lists, publishes (Publishing: put-if-absent),
// reads, purges and removes stale temp files for all of them; a Codec per
// artifact gives its file names, their order and the file format, specified
// beside the codec (OffsetsCodec, CommitsCodec, FileSourceCodec here,
// shape.Codec, the ethrpc history codec). Common rules: a missing directory
// is an empty log; temp files are never listed; a name the codec does not
// parse is ignored (offsets/, commits/, the ethrpc history, a FileStreamSource
// log Spark wrote, whose .crc files sit beside it) or, for logs only
// ethstream writes (shape/, the s3archive source's log), CHECKPOINT_CORRUPT
// naming the file; two files with one key (<n> and <n>.compact) are
// CHECKPOINT_CORRUPT; ids may have gaps where the artifact's rules allow
// them (offsets/ and commits/ after retention, a file source log before its
// newest compact file); a damaged file is CHECKPOINT_CORRUPT naming it.
//
// A directory is a checkpoint once it holds metadata or an offsets or commits
// entry. Commands that only read (inspect) refuse anything else (an empty
// directory, a Delta table) as INVALID_ARGUMENT "not a checkpoint", and a
// path that is a regular file as "not a directory"; they never create the
// directory.
//
// # Lines
//
// Offsets, commits and file source logs are lines: writers separate them with
// "\n", and readers end a line at "\n", "\r\n" or "\r" (Java's readLine, which
// Spark reads them with). As Spark writes them, the last line has no final
// "\n"; files written by earlier ethstream versions end with one, and both
// read the same (a final line terminator does not start another line). The
// metadata file is one JSON object, without a final newline too. A missing
// final newline is not truncation: files are published complete
// (Publishing), so the corruption signals are a line that does not parse and
// a version that is unknown.
//
// # metadata
//
// One line, a JSON object with one field, no version line, no final newline
// (as Spark):
//
//	{"id":"6f1c1f3e-8a4b-4c3e-9b8e-3f0e2b7d9a10"}
//
// The id is a random UUID chosen on the first start; it is the query id
// forever (the Delta sink's txn appId). Each start also gets a new run id,
// which is never persisted here (only in progress events).
//
// # offsets/<batchId>, version 1
//
// Written before batch <batchId> runs (no final newline, see Lines):
//
//	v1
//	{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{"spark.sql.shuffle.partitions":"200",...}}
//	{"logOffset":3}
//	-
//
// Line 1 is the version. Line 2 is the batch metadata: batchWatermarkMs (the
// event-time watermark, ms, in force for this batch), batchTimestampMs (the
// processing time at planning, ms; a re-run batch sees the same value) and
// conf, the pinned settings (see Pinned confs). Then one line per source in
// plan order: the source's end offset for this batch as compact JSON, or "-"
// for "no offset yet". Sources are keyed by position: line 3 is source 0.
// A blank line 2 means "no metadata" (as Spark): zero watermark and
// timestamp, no conf. The metadata of Spark 2.1 has no conf at all, later
// versions a few or many keys; missing keys mean what Missing conf keys
// says. An offset is kept as opaque compact JSON whatever the source kind
// (a file source's 0 or {"logOffset":0}, Kafka's {"topic-0":{"0":1}}); only
// the source that wrote it interprets it.
//
// # offsets/<batchId>, version 2
//
//	v2
//	{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{...},"sourceMetadataInfo":{"eth_live":{"sourceId":"eth_live","providerName":"EthRPCSource","apiVersion":"1"}},"controlBatchInfo":null,"tombstones":{"s3_backfill":{"removedInBatch":41,"lastOffset":{"logOffset":11}}}}
//	eth_live:{"block":26087209,"hash":"0x…"}
//
// Line 2 is required and holds the V1 fields plus:
//   - sourceMetadataInfo: source key -> {sourceId, providerName, apiVersion}.
//     Spark may leave it empty ({}) or missing: a source line without an
//     entry is keyed by its line alone. An entry without a source line is
//     damage (CHECKPOINT_CORRUPT). ethstream writes one entry per source
//     line; its providerName is the source's description up to its first
//     "[", "(" or space (FileStreamSource, EthRPCSource);
//   - controlBatchInfo: null for a data or no-data batch, or for a control batch
//     {"operationType":"REPARTITION","operationInfo":{"from":"200","to":"8"}}
//     (counts as decimal strings);
//   - tombstones: source name -> {"removedInBatch":N,"lastOffset":<json|null>},
//     the sources removed from the query, with the first batch id written
//     without them and their last committed offset. Every later entry carries
//     every tombstone forward, so retention never forgets one. Omitted when
//     empty.
//
// Source lines are "<key>:<offsetJson>", split at the first colon; key is the
// source name (source evolution on) or its position (V2 without evolution);
// "-" means no offset yet. Lines are written in the query's source order; a
// reader must not rely on it.
//
// Maps are written with sorted keys. Unknown metadata fields are ignored by
// readers (forward-compatible additions); an unknown version is refused.
//
// # Pinned confs
//
// conf holds the settings that must not change for the life of a checkpoint,
// restored on every restart over the session's values (with a warning):
//
//	spark.sql.shuffle.partitions                               state partition count (as Spark >= 4.1)
//	spark.sql.streaming.queryEvolution.enableSourceEvolution   "true" or "false"
//	spark.sql.streaming.stateStore.providerClass               "pebble"
//
// ethstream records all three in every entry. Other keys (Spark writes many,
// e.g. spark.sql.streaming.aggregation.stateFormatVersion) are carried
// forward unchanged and not interpreted.
//
// # Missing conf keys
//
// A key an entry does not record (a checkpoint older than the key, or one
// Spark wrote) means Spark's value for old checkpoints (ConfValue):
//
//	spark.sql.shuffle.partitions
//	    Spark injects no default: the session's value prevails, else Spark's
//	    default 200. Spark 2.1 recorded no conf at all.
//	spark.sql.streaming.queryEvolution.enableSourceEvolution
//	    "false": the checkpoint predates source evolution (as Spark).
//	spark.sql.streaming.stateStore.providerClass
//	    org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider:
//	    Spark's default provider, the one a Spark session without the key
//	    uses, and the only one of the Spark versions that did not record it.
//	    ethstream always records "pebble", so a missing key is a Spark
//	    checkpoint, and its state is foreign (see Foreign state).
//
// # Foreign state
//
// The state/ of a checkpoint whose provider (above) is not "pebble" was
// written by another engine, e.g. Spark's HDFSBackedStateStoreProvider or
// org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider,
// and ethstream cannot read it. Its logs still read (checkpoint inspect, plan,
// progress), but a start (run) and checkpoint repartition are refused with
// STATE_PROVIDER_UNSUPPORTED, naming the provider, before anything is
// written: the checkpoint stays byte-identical and not even .lock is created
// (Snapshot.CheckStateProvider).
//
// # commits/<batchId>
//
// Written after batch <batchId> completed (state committed, sink written),
// no final newline:
//
//	v1
//	{"nextBatchWatermarkMs":1700000005000}
//
// nextBatchWatermarkMs is the watermark computed after the batch, for the
// next one; missing, it is 0 (Spark 2.2 wrote "{}"). Line 2 must be a JSON
// object and there are exactly two lines. A batch counts as committed only
// once this file exists.
//
// # sources/<key>/ of a FileStreamSource
//
// Spark's file source (and ethstream's s3archive source) keeps its log of
// admitted files in sources/<key>/, one file per source log id n (the
// source's own counter, not a batch id):
//
//	<n>           the files admitted by log id n
//	<n>.compact   every file admitted by ids 0..n (a compaction)
//
//	v1
//	{"path":"file:///a/b/0","timestamp":1480730949000,"batchId":0}
//
// Line 1 is the version (1); then one JSON object per admitted file: path
// (URL-encoded URI), timestamp (modification time, ms) and batchId (the log
// id that admitted it: n in <n>, 0..n in <n>.compact). ethstream's source
// adds size (the file's bytes; absent when unknown, as in Spark's logs;
// FileEntry), and fields neither knows are ignored, as Spark ignores them.
// Spark writes no final newline; Spark 2.1 wrote one; both read. The whole
// log is the newest <c>.compact plus every id after c, which must all exist
// (ids before c may have been deleted); other names are ignored
// (ReadFileSourceLog), such as the s3archive source's moves/ directory.
//
// # Versions
//
// The first line is "v" followed by a decimal integer > 0. Offsets accept 1
// and 2, commits and file source logs 1. A larger version is a file from a
// newer writer and is refused as CHECKPOINT_CORRUPT ("unsupported future
// version"), as is any malformed or unparsable file; ethstream never starts
// a checkpoint afresh because a file is damaged.
//
// # Publishing
//
// Every file is published by package durable in NoOverwrite mode: written as
// ".<name>.<16 hex digits>.tmp" in its final directory, fsynced and closed,
// then hard-linked to its final name (which fails if the name exists: a file
// is never overwritten, and a second write of the same batch id is
// ErrExists), the temp name removed and the directory fsynced. A crash leaves
// either no file or the complete file, plus possibly a stale temp file (any
// name starting with "." and ending in ".tmp") that the next writer deletes.
//
// # Lock
//
// A running query holds an exclusive lock on .lock (vfs.FS.Lock: fcntl on
// Linux, released by the kernel when the process dies, so a stale lock never
// blocks a restart). A second query on the same checkpoint, in this process
// or another, gets CHECKPOINT_LOCKED.
//
// # Retention
//
// After writing offsets/N, entries of offsets/ and commits/ with id <
// N - minBatchesToRetain are deleted (default 100). Tombstones survive because
// each entry carries them all. A writer lists the two logs for its first
// purge only; after that it deletes the ids that fell out of the retention
// by name (no listing per batch, which is a LIST on S3). Offsets go before
// commits, oldest first, so a crash midway leaves commits older than the
// oldest offsets entry (legal) and never a gap; the newest entries are
// never deleted, so the commit log ends at most one batch before the
// offsets log (Dir.CheckCommitLogEnd: anything more is damage, refused).
//
// # progress/ (the progress log), format 2
//
// Appended after each batch: one StreamingQueryProgress JSON object per line,
// each ended by "\n" (package engine defines its shape). The log is a
// sequence of segments, <ckpt>/progress/<n>.jsonl with n a 20-digit
// zero-padded segment number from 0, read in ascending order; names in
// progress/ that are not segment names are ignored. Format 1 was a single
// <ckpt>/progress.jsonl: where it exists, it is read first, and it is never
// appended to.
//
//   - Append: the writer (the lock holder) appends to the newest segment
//     while that stays within ProgressSegmentBytes (256 KiB) and ends with
//     "\n"; otherwise it starts segment newest+1. An append therefore costs
//     at most one segment where an append rewrites the object (S3), and the
//     line itself on a local disk.
//   - Retention: after starting a segment, the writer deletes the oldest
//     segments (the format 1 file included) while the newer ones hold at
//     least ProgressRetainBytes (8 MiB, a few thousand events), oldest
//     first. The offsets log keeps 100 batches; this log keeps the recent
//     history a dashboard shows, and no more, however long the query runs.
//   - Informational: nothing is fsynced. A torn final line of a segment (a
//     crash mid-append) is skipped by readers, and the next writer starts a
//     new segment after it.
package checkpoint
