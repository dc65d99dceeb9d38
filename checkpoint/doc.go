// Package checkpoint reads and writes ethstream's checkpoint directory: the
// durable record of a streaming query (docs/contracts.md, Checkpoint). Its layout and formats
// mirror Spark Structured Streaming's so that Spark's explanations apply
// literally; they are versioned and never change incompatibly. Every file is
// read and written through a pebble vfs.FS so that tests can inject crashes.
//
// # Layout
//
//	<ckpt>/metadata              {"id":"<uuid>"}: the query id, written once
//	<ckpt>/offsets/<batchId>     write-ahead log of planned batches (v1 or v2)
//	<ckpt>/commits/<batchId>     batch completion log (v1)
//	<ckpt>/sources/<key>/...     per-source private logs; key = name (V2) or position (V1)
//	<ckpt>/state/<opId>/...      state store files (owned by package state, not this one)
//	<ckpt>/progress.jsonl        one StreamingQueryProgress JSON per line (informational)
//	<ckpt>/.lock                 empty file locked while a query runs
//
// <batchId> is a non-negative decimal integer without leading zeros. Names in
// offsets/ and commits/ that are not batch ids are ignored, except temporary
// files (see Publishing), which are deleted when a writer opens the checkpoint.
//
// # metadata
//
// One line, a JSON object with one field, no version line (as Spark):
//
//	{"id":"6f1c1f3e-8a4b-4c3e-9b8e-3f0e2b7d9a10"}
//
// The id is a random UUID chosen on the first start; it is the query id
// forever (the Delta sink's txn appId). Each start also gets a new run id,
// which is never persisted here (only in progress events).
//
// # offsets/<batchId>, version 1
//
// Written before batch <batchId> runs. Lines are separated by "\n" and the
// file ends with "\n"; a file that does not end with "\n" was truncated.
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
//
// # offsets/<batchId>, version 2
//
//	v2
//	{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{...},"sourceMetadataInfo":{"eth_live":{"sourceId":"eth_live","providerName":"ethrpc","apiVersion":"1"}},"controlBatchInfo":null,"tombstones":{"s3_backfill":{"removedInBatch":41,"lastOffset":{"logOffset":11}}}}
//	eth_live:{"block":26087209}
//	s3_backfill:-
//
// Line 2 is required and holds the V1 fields plus:
//   - sourceMetadataInfo: source key -> {sourceId, providerName, apiVersion}, one
//     entry per source line (a missing line is detected as truncation);
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
//	spark.sql.streaming.queryEvolution.enableSourceEvolution   "true" or "false"; missing reads as "false"
//	spark.sql.streaming.stateStore.providerClass               "pebble"
//
// # commits/<batchId>
//
// Written after batch <batchId> completed (state committed, sink written):
//
//	v1
//	{"nextBatchWatermarkMs":1700000005000}
//
// nextBatchWatermarkMs is the watermark computed after the batch, for the
// next one. A batch counts as committed only once this file exists.
//
// # Versions
//
// The first line is "v" followed by a decimal integer > 0. Offsets accept 1
// and 2, commits 1. A larger version is a file from a newer ethstream and is
// refused as CHECKPOINT_CORRUPT ("unsupported future version"), as is any
// malformed, truncated or unparsable file; ethstream never starts a
// checkpoint afresh because a file is damaged.
//
// # Publishing
//
// Every file is written as ".<name>.tmp" in its final directory, fsynced and
// closed, then hard-linked to its final name (which fails if the name exists:
// a file is never overwritten, and a second write of the same batch id is
// ErrExists), the temp name removed and the directory fsynced. A crash leaves
// either no file or the complete file, plus possibly a stale temp file that
// the next writer deletes.
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
// each entry carries them all.
//
// # progress.jsonl
//
// Appended after each batch: one StreamingQueryProgress JSON object per line
// (package engine defines its shape). Informational: a torn final line after
// a crash is skipped by readers.
package checkpoint
