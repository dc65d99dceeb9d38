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
//	<version:%020d>.<attempt>.delta     the changes of one batch
//	<version:%020d>.<attempt>.snap      the full state at a version
//	<version:%020d>.<attempt>.meta      the version's metadata; written last
//	<version:%020d>.<attempt>.snapmeta  the record of a background snapshot
//	                                    (of a committed delta version): written
//	                                    after its .snap
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
// the first version that is a snapshot (an inline one: kind "snapshot", or
// a delta version with a background snapshot: a .snapmeta for that very
// attempt) or to the empty state, apply the snapshot, then each delta in
// order. That is the newest snapshot at or below v. Commits always write a
// delta (the first version a delta on the empty state); only a
// repartition writes an inline snapshot (and checkpoints of earlier
// builds hold inline snapshots every SnapshotEvery versions, read as
// before).
//
// # Background snapshots
//
// Once the chain of the committed version holds Options.SnapshotEvery
// deltas after its snapshot (default 10, as Spark's minDeltasForSnapshot),
// those deltas hold at least the snapshot's bytes and the chain's files
// hold more records than the version has keys (a chain of keys each
// written once, as a deduplication's, holds nothing a snapshot would drop),
// or holds 10 x SnapshotEvery deltas whatever their bytes (maintain.go,
// chainDue), the
// commit starts a maintenance goroutine owned by the Store that
// writes the full state of that committed version, attempt a, as
//
//	<v>.<a>.snap      a data file (format below) of kind 2 (snapshot),
//	                  header version v, attempt a: the k-way merge of the
//	                  chain's files, newest record winning, deletes dropped
//	<v>.<a>.snapmeta  its record, published after the .snap is durable
//
// and commits go on meanwhile: it reads only the immutable checkpoint
// files of v's chain, never the Pebble instances the next batches write,
// so a commit waits for nothing but a non-blocking check. One runs at a
// time; Close (and a reload) cancels and joins it. An error is logged and
// the next commit starts it again (over a .snap a failure left without
// .snapmeta, which it removes first). The commit that sees it done
// shortens the chain it counts to the deltas after v and recomputes the
// garbage. Why a goroutine rather than a Maintain call the engine
// schedules: the engine's batch loop is sequential, so a step between
// batches would still delay the next batch by the whole snapshot (16.6 s
// at 26M keys), and the store alone knows when its chain is long.
//
// The .snapmeta is three newline-terminated lines, like a .meta:
//
//	ethstream-state-snapmeta v1
//	{"formatVersion":1,"storeId":"<uuid>","version":12,"attempt":0,
//	 "data":"00000000000000000012.0.snap","dataSize":75311,"dataRecords":3154,
//	 "partitions":8,"rows":3154}
//	crc32c:<8 lowercase hex digits of CRC-32C over the JSON line>
//
// Unknown fields, another formatVersion or header, dataRecords != rows, or
// a record whose storeId, partitions or rows differ from attempt a's .meta
// are CHECKPOINT_CORRUPT naming the .snapmeta; a .snap that does not match
// its record (size, header, chunks, footer count) is CHECKPOINT_CORRUPT
// naming the .snap. A .snap without its .snapmeta is not a snapshot (a
// crash before the record was published): loading ignores it and uses the
// deltas, and the file goes with its version's garbage.
//
// A reader of an older build (formatVersion 4 and before) knows neither
// the .snapmeta (its catalog keeps an unknown name untouched) nor a .snap
// of a delta version (its .meta names the .delta, which it reads): it
// never reads a background snapshot, so cannot misread one. Once this
// build has collected the deltas below a background snapshot, an older
// build loading a version after it follows the base pointers to a
// missing .meta and fails with CHECKPOINT_CORRUPT naming the state
// directory; it does not guess.
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
// # Metadata file format (.meta), formatVersion 2 and 5 (1, 3 and 4 are still read)
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
// version); min <= max. A store whose cache is not built (Options.LazyCache)
// keeps a partition's bounds across deletes: a wider range, holding every
// key all the same (readers only skip what lies outside). Scan(lower, upper) skips, without opening its Pebble
// instance, every partition whose range misses [lower, upper): eviction
// scans [-inf, watermark) and keys start with window_end, so it opens only
// the partitions holding closed windows. formatVersion 1 is the same without
// partitionKeys (all bounds unknown).
//
// formatVersion 5 is 2 plus "operator":"<base64>", required and at most
// 64 KB: the operator's own record of the version (Store.SetOperatorRecord,
// Store.OperatorRecord, Record.Operator), which the store keeps without
// reading and carries through a repartition; its format and versions are
// the operator's (the aggregation's: agg/doc.go, Operator record). This
// build writes 5 for a version whose operator gave a record and 2
// otherwise, so that a reader that does not know the field refuses exactly
// the files that carry it.
//
// formatVersion 3 (2 plus "closedRows":<n>, n > 0) and 4 (3 with
// closedRows optional plus "nextWatermarkMs":<ms>, required), written by
// builds up to 27801e4, kept two facts of the aggregation in the store's
// own record. They are read, never written: the store hands the operator
// the JSON object of those two fields as written
// ({"closedRows":n,"nextWatermarkMs":ms}, each only when present) as the
// version's record, which the aggregation reads as its record format 0,
// and a repartition of such a version writes that record in format 5.
// Whichever optional field a format does not hold is refused in it. An
// unknown header or formatVersion is CHECKPOINT_CORRUPT, never guessed at.
//
// # Garbage
//
// After each snapshot, background or inline (and after a commit that finds
// versions above the one it loaded) the store deletes: every version above
// the committed one (an abandoned history), every attempt of a version
// other than its newest metadata attempt, and every version older than the
// snapshot that starts the chain of version (latest - Retain), a
// background snapshot included (the deltas below it are then garbage; its
// own .delta stays with its version), Retain defaulting to 100 (Spark's
// default minBatchesToRetain; the engine does not pass its conf value, so a
// query keeps 100 state versions whatever it sets). Files needed by versions
// ≥ latest - Retain are always kept, and so are the chain and the files of
// the version a background snapshot in flight reads and writes. Deletion
// runs newest first, .meta before .snapmeta before data, after the new
// version is published. An abandoned history is
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
//	LocalDir/gen-<id>/spill/   a repartition's sorted run files (spill.go), removed
//	                           when it ends; Open removes any a crash or a failed
//	                           removal leaves (in every generation but the trusted
//	                           one, then in the trusted one)
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
// Pebble runs without a WAL and without fsyncs, and its instances create
// only the files they read back (MANIFEST and markers, sstables: no WAL,
// OPTIONS or LOCK file, leanfs.go): the cache is trusted only if
// MARKER names exactly the version being opened (same storeId, version,
// attempt and counts) and its generation. Open deletes MARKER before anything can change the
// cache; Close flushes every written partition, calls syncfs(2) once, and
// rewrites MARKER. Anything else (no marker, a crash, another checkpoint, a
// fresh machine) rebuilds the cache from the checkpoint files: the snapshot
// by sstable ingestion, deltas as Pebble batches. Deleting LocalDir between
// runs therefore only costs a rebuild.
//
// With Options.MemCacheBytes (the join, the aggregation and the session
// window set it), a new
// generation whose rebuild reads at most that many bytes of checkpoint
// files runs its instances on an in-memory file system: nothing is created
// under LocalDir, the rebuild waits for the first read or write and fills
// each partition when it is first opened (chainfill.go; a LazyCache
// store's is lazybuild.go's), and Close
// writes no MARKER (the next Open rebuilds) unless the files hold 16 MB or
// more. Such files, or files that outgrow the budget
// around a commit, are flushed and copied to LocalDir/gen-<id>/, where the
// cache carries on as above (memcache.go).
//
// All instances share one block cache (Options.CacheBytes) and one file
// cache; memtables start at 256 KB and grow to 256 MB / partitions (clamped
// to 1-16 MB); one compaction per instance, granted without a periodic
// goroutine (partitions.instanceOptions); every table carries a Bloom
// filter (the merge reads every key a batch creates, absent from every
// table until then) and no block compression; L0 compacts at 16 tables,
// not Pebble's 4 (partitions.newPartitions). A commit touches only the
// partitions its batch changed, so its cost does not grow with the
// partition count.
//
// # Repartitioning
//
// Repartition(base, v, n) reads version base old partition by old
// partition, each in key order, and splits the keys into one sorted run
// file per new partition (PartitionOf(key, n)) on the local disk; then, new
// partition by new partition, it merges that partition's runs (a k-way
// merge, one small buffer per run) into one snapshot of version v with n
// partitions and into the sstable that a new cache generation ingests.
// Memory is those buffers (8 MB of run write buffers, 4 MB of read
// buffers), not the keys. Version base is read from the open instances when every
// non-empty partition is open, and otherwise from its checkpoint files (a
// streaming k-way merge of the snapshot and the deltas of its chain, the
// newest write of a key winning and a delete dropping it): right after a
// restart that is far cheaper than opening 200 instances. The new
// generation replaces the cache only once v is published; a failure leaves
// the committed version and the cache as they were. Redoing it after a
// crash writes a new attempt with identical content.
//
// # Row codec
//
// Keys are order-preserving (see AppendInt64Key); values are compact (see
// AppendInt64Value). ReadAll decodes rows for tools such as `ethstream state
// dump`.
package state
