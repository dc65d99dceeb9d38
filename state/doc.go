// Package state is ethstream's partitioned, versioned key-value state store
// (docs/contracts.md, State): one Pebble instance per state partition as a local cache,
// and the checkpoint as the only source of truth.
//
// # Model
//
// A Store holds the committed version v (a batch id, -1 = empty) plus one
// pending batch of puts and deletes kept in memory. Reads (Get, Scan) see the
// pending batch over the committed version. Commit(v') publishes v' to the
// checkpoint, then applies the batch to the local Pebble instances; Abort drops
// it. Commit may be split: Prepare(v') publishes the data file of v' only (the
// version stays invisible: it has no .meta file) and freezes the pending
// batch; Commit(v') then publishes the .meta file and applies the cache, and
// Abort instead leaves the data file as garbage, exactly what a crash
// between the two files leaves. The engine prepares and commits while the
// sink writes.
// A key lives in partition PartitionOf(key, n): FNV-1a 64 of the encoded
// key bytes modulo n. That function is part of the format and never changes.
//
// The Store is not safe for concurrent use.
//
// # Checkpoint files
//
// Everything needed to rebuild any retained version lives in Dir
// (<ckpt>/state/<opId>/) and is written through the given vfs.FS:
//
//	<version:%020d>.<attempt>.delta   the changes of one batch
//	<version:%020d>.<attempt>.snap    the full state at a version
//	<version:%020d>.<attempt>.meta    the version's metadata; written last
//
// A version is committed iff its .meta file exists and verifies. Every file
// is published crash-safely by package durable (write .<name>.<hex>.tmp,
// fsync, close, link(2) put-if-absent, fsync Dir; a conditional PUT on S3)
// under a name never used before, and is never modified afterwards.
// Attempts make re-runs safe: committing version v again (the engine re-runs
// a batch whose state was committed but whose commits/<v> was not) writes
// attempt max+1 (over every file name seen for v); the newest attempt with a
// .meta file wins. A crash leaves at most a .tmp file (deleted by the next
// Open) or a data file without metadata (never read, collected as garbage).
//
// Loading version v: read v's newest .meta, follow its base pointers back to
// a snapshot (or to the empty state), apply the snapshot, then each delta in
// order. A snapshot is written instead of a delta when the chain since the
// last snapshot reaches Options.SnapshotEvery deltas (default 10), for the
// first version, and always for a repartition. A snapshot is written from
// the open Pebble instances when every non-empty partition is open, and
// otherwise from the files (the last snapshot merged with the deltas since
// and the batch), so that it does not open every partition after a restart.
//
// # Data file format (.delta and .snap), version 1
//
// All integers little-endian; uvarint as in encoding/binary; CRC-32C
// (Castagnoli).
//
//	+------------------------------------------------------------------+
//	| header, 28 bytes                                                 |
//	|   magic "ESSD" | format u16 = 1 | kind u8 (1 delta, 2 snapshot) |
//	|   reserved u8 = 0 | version u64 | attempt u32 | partitions u32   |
//	|   crc32c u32 of the 24 bytes before it                           |
//	+------------------------------------------------------------------+
//	| chunk: length u32 (> 0) | crc32c u32 of payload | payload        |
//	|   payload = records, each whole within its chunk; ~64 KB chunks  |
//	+------------------------------------------------------------------+
//	| ... more chunks ...                                              |
//	+------------------------------------------------------------------+
//	| footer: u32 = 0 | record count u64 | crc32c u32 of the count     |
//	+------------------------------------------------------------------+
//
//	record := kind u8 (1 put, 2 delete) | partition uvarint |
//	          key length uvarint | key | (put only) value length uvarint | value
//
// Records are in strictly ascending (partition, key) order, and each
// record's partition equals PartitionOf(key, partitions); a snapshot holds
// only puts. Readers verify all of it, the byte size and record count given
// by the metadata, and refuse anything else as CHECKPOINT_CORRUPT naming the
// file (with the chunk offset where known). Example: a delta of version 12
// (attempt 0, 8 partitions) that sets one key in partition 3 and deletes one
// in partition 5 is the header, one chunk with two records
// "01 03 <klen> <key> <vlen> <val>" and "02 05 <klen> <key>", and the
// footer with count 2.
//
// # Metadata file format (.meta), formatVersion 2 to 4 (1 is still read)
//
// Three newline-terminated lines:
//
//	ethstream-state-meta v1
//	{"formatVersion":2,"storeId":"<uuid>","version":12,"attempt":0,
//	 "kind":"delta","data":"00000000000000000012.0.delta","dataSize":311,
//	 "dataRecords":2,"base":{"version":11,"attempt":0},"chainLength":2,
//	 "chainBytes":611,"partitions":8,"rows":3154,"partitionRows":[...8 counts],
//	 "partitionKeys":[{"min":"<base64 key>","max":"<base64 key>"},null,...8 entries],
//	 "schema":{"operatorName":"stateStoreSave","key":[{"name":"window_end","type":"timestamp"},...],
//	           "value":[{"name":"count","type":"int64"}],"spec":"agg/v1 window=block_ts ..."}}
//	crc32c:<8 lowercase hex digits of CRC-32C over the JSON line>
//
// (the JSON is on one line). base is null for a snapshot and for a delta on
// the empty state. storeId is generated when a store starts from empty and
// copied forward; it ties the local cache to this checkpoint. schema is the
// operator metadata: Open compares it with the query's and refuses a change
// with STATE_SCHEMA_MISMATCH naming both. A key field may carry
// "nullable":true (an Int64 or Timestamp key with a null, encoded with a
// marker byte: codec.go); a field without it is written and read as
// before the flag existed. partitions is the partition count
// of that version. partitionKeys (formatVersion 2) gives each partition's
// smallest and largest encoded key, or null for an empty partition or one
// whose bounds are unknown (a partition untouched since a formatVersion 1
// version); min <= max. Scan(lower, upper) skips, without opening its Pebble
// instance, every partition whose range misses [lower, upper): eviction
// scans [-inf, watermark) and keys start with window_end, so it opens only
// the partitions holding closed windows. formatVersion 1 is the same without
// partitionKeys (all bounds unknown). formatVersion 3 is 2 plus
// "closedRows":<n> (n > 0): rows the operator counts as part of the
// version without storing them (Store.SetClosedRows; for the aggregation,
// windows the next batch's watermark closes). formatVersion 4 is 3 with
// closedRows optional (omitted when 0) plus "nextWatermarkMs":<ms>,
// required: the watermark the batch after this version runs with, the value
// commits/<version> records as nextBatchWatermarkMs (Store.SetNextWatermark;
// a repartition carries its base version's). It is the checkpoint's second
// record of that watermark: a start and `checkpoint verify` compare the two
// (ReadRecord), so a commit replaced by valid JSON with another watermark is
// CHECKPOINT_CORRUPT instead of a silent jump of the watermark. This build
// writes 4 when the operator gave the watermark, else 3 when closedRows > 0
// and 2 otherwise, so a reader that does not know a field refuses exactly
// the files that carry it. An unknown header or formatVersion is
// CHECKPOINT_CORRUPT, never guessed at.
//
// # Garbage
//
// After each snapshot (and after a commit that finds versions above the one
// it loaded) the store deletes: every version above the committed one (an
// abandoned history), every attempt of a version other than its newest
// metadata attempt, and every version older than the snapshot that starts
// the chain of version (latest - Retain), Retain defaulting to 100 (Spark's
// default minBatchesToRetain; the engine does not pass its conf value, so a
// query keeps 100 state versions whatever it sets). Files needed by versions
// ≥ latest - Retain are always kept. Deletion runs newest first, metadata
// before data, after the new version is published. An abandoned history is
// deleted at once; the rest of a snapshot's garbage at most 4 files per
// commit (and whatever is left at Close), so that no batch pays for all of
// it.
//
// # Local cache (LocalDir)
//
//	LocalDir/gen-<id>/p-<i>/   Pebble instance of partition i (created on first use,
//	                           opened on the first read or write of one of its keys;
//	                           a Get or Scan outside its key bounds does not open it)
//	LocalDir/gen-<id>/ingest/  sstables being built for ingestion
//	LocalDir/MARKER            "ethstream-state-cache v1\n" + JSON {gen, storeId,
//	                           version, attempt, partitions, partitionRows}
//
// A generation is one set of instances; a rebuild or a repartition starts a
// new one, and the replaced generation is closed and deleted in the
// background (Close waits for it), so a repartition does not pay for closing
// 200 instances. Open deletes every generation but the trusted one.
//
// A commit writes each partition's changes to its instance as one Pebble
// batch. When a partition's deletes are exactly its lowest committed keys
// (an eviction: the bounds check that reads its first surviving key finds
// them), the batch holds one range deletion for them, ahead of the puts,
// instead of a tombstone per key (the data file still has one delete record
// per key): Pebble drops the covered files instead of compacting a million
// tombstones per backfill batch.
//
// Pebble runs without a WAL and without fsyncs: the cache is trusted only if
// MARKER names exactly the version being opened (same storeId, version,
// attempt and counts) and its generation. Open deletes MARKER before anything can change the
// cache; Close flushes every written partition, calls sync(2) once, and
// rewrites MARKER. Anything else (no marker, a crash, another checkpoint, a
// fresh machine) rebuilds the cache from the checkpoint files: the snapshot
// by sstable ingestion, deltas as Pebble batches. Deleting LocalDir between
// runs therefore only costs a rebuild.
//
// All instances share one block cache (Options.CacheBytes) and one file
// cache; memtables start at 256 KB and grow to 256 MB / partitions (clamped
// to 1-16 MB); one compaction per instance; every table carries a Bloom
// filter (the merge reads every key a batch creates, absent from every
// table until then). A commit touches only the
// partitions its batch changed, so its cost does not grow with the
// partition count.
//
// # Repartitioning
//
// Repartition(base, v, n) reads version base sequentially, routes each key
// with PartitionOf(key, n), sorts each new partition's keys, writes one
// snapshot of version v with n partitions, and replaces the cache by a new
// generation built by ingesting one sstable per non-empty new partition.
// Version base is read from the open instances when every non-empty
// partition is open, and otherwise from its checkpoint files (the deltas
// folded into a map of overrides, then the snapshot streamed through it):
// right after a restart that is far cheaper than opening 200 instances.
// Redoing it after a crash writes a new attempt with identical content.
//
// # Row codec
//
// Keys are order-preserving (see AppendInt64Key); values are compact (see
// AppendInt64Value). ReadAll decodes rows for tools such as `ethstream state
// dump`.
package state
