// Package chain is ethstream's synthetic, deterministic, mainnet-like
// Ethereum chain and the services that expose it: an archive writer in the
// AWS public-blockchain Parquet layout, an embedded S3 endpoint over a
// directory, and an embedded JSON-RPC node that continues the archive's
// chain (docs/contracts.md, Data).
//
// # The chain model
//
// One global model spans 4,080 days from 2015-07-30 (genesis
// 2015-07-30T15:26:13Z) and blocks 1..26,086,569 exactly, the last on
// 2026-09-29. Every preset (see Preset) is a window of whole days of it.
//
// Layout. The model first lays out days (plan, model.go), never touching
// individual blocks, in three segments with exact block totals:
//
//	genesis+15 s .. London (2021-08-05T12:33:42Z)  blocks 1 .. 12,964,999
//	London .. the merge (2022-09-15T06:42:59Z)     blocks 12,965,000 .. 15,537,393
//	the merge .. 2026-09-30T00:00:00Z              blocks 15,537,394 .. 26,086,569
//
// Proof-of-work segments distribute blocks over days in proportion to
// day-length / mean-block-time, where the mean block time follows mainnet
// (about 13-15 s, up to ~30 s in the 2017 difficulty bomb and ~20 s in the
// early-2019 one, with drops at Byzantium, Constantinople, Muir Glacier,
// Arrow and Gray Glacier), times a ±2% daily jitter. The post-merge segment
// has 12 s slots counted from the merge; its missed slots (0.715% overall,
// fixed by the slot and block counts) are spread over days with a varying
// daily rate. Running totals use cumulative rounding, so every segment ends
// on its exact block. The first block of each segment sits exactly on the
// segment start (block 1 at genesis+15 s, block 12,965,000 at London's
// timestamp, block 15,537,394 at the merge's). The layout draws only on
// seed-independent streams: block numbers, days and timestamps-per-day counts
// are the same for every seed, so presets name block ranges without a seed.
//
// Blocks. Everything else derives from (seed, day) alone, so days are built
// in parallel (buildDay, blocks.go):
//   - timestamps: proof-of-work blocks take n distinct seconds of the day
//     uniformly (geometric gaps, like mining); post-merge blocks occupy all
//     slots but the day's missed ones;
//   - producers: before the merge, a dozen mining pools whose shares drift
//     over their active years (ethermine, sparkpool, f2pool, ...), plus a Zipf
//     tail of 3,000 solo miners (35% of blocks in 2015, 6% in 2022); after it,
//     builders whose concentration grows, plus a tail of 20,000 validators
//     building locally (45% at the merge, 3.5% in 2026), which gives about 5.6
//     distinct fee recipients per 5-minute window in September 2026.
//     Addresses are keccak-derived from the producer's name and fixed across
//     seeds; miner strings are lowercase 0x-hex;
//   - gas limit (mainnet's steps, with ±1/2048 miner votes before London),
//     utilisation (low in 2015, ~95% before London, ~50% ± 22% after), empty
//     blocks (85% in 2015 down to 0.2%), transaction count = gas used / mean
//     gas per transaction;
//   - difficulty: a log-interpolated mainnet curve with per-block jitter in
//     steps of 1/2048 (like mainnet's adjustment) that telescopes to zero
//     over a day, so total difficulty at each day's start is known without
//     building earlier days; 0 after the merge;
//   - base fee from block 12,965,000 (exactly 1 gwei there): the day's first
//     block takes a seeded day-level level (a log random walk around
//     mainnet's history), later blocks follow EIP-1559 from their parent;
//   - withdrawals root from Shanghai (2023-04-12T22:27:35Z), blob gas and
//     parent beacon root from Cancun, requests hash from Prague, by
//     timestamp as on mainnet; state, transactions, receipts, withdrawals
//     roots and mix digests are seeded random hashes (transactions and
//     receipts roots are the empty-trie roots for empty blocks); logs blooms
//     are sparse to keep the archive small: zero, or one log entry's three
//     bits in 5% of blocks in 2015 and 15% from 2017.
//
// Hashes. Headers are go-ethereum types.Header values and each ParentHash
// is the previous header's Hash(). Hashing all of history takes a minute, so
// the hash chain of a preset starts at the preset's first block, whose
// ParentHash is an anchor: keccak256("ethstream-anchor" || seed ||
// purpose || firstBlock) (for the seed preset, block 1's parent is thus a
// seeded genesis hash). Two presets of one seed agree on every field but the
// hashes. Only hashing is sequential: GenerateArchive builds days in
// parallel, links and hashes them in day order in one goroutine, and encodes
// them in parallel.
//
// # Archive layout
//
//	<out>/v1.0/eth/blocks/date=YYYY-MM-DD/part-00000-<uuid>-c000.snappy.parquet
//	<out>/manifest.json
//
// One file per day; uuid is a SHA-1 (v5) UUID of "ethstream/<seed>/<date>",
// so regeneration is byte-identical. Each file has two row groups, Snappy
// compression, schema "spark_schema" with these columns, in order:
//
//	timestamp          int64 TIMESTAMP(MICROS, UTC)   required, DELTA_BINARY_PACKED
//	number             int64                          required, DELTA_BINARY_PACKED
//	hash, parent_hash, nonce, sha3_uncles, logs_bloom,
//	transactions_root, state_root, receipts_root,
//	miner              string (0x-hex, lowercase)     required
//	difficulty, total_difficulty  double              required
//	size               int64                          required
//	extra_data         string (0x-hex)                required
//	gas_limit, gas_used, transaction_count  int64     required
//	base_fee_per_gas   int64, optional                files from 2021-08-05 on
//	withdrawals_root   string, optional               files from 2023-04-12 on
//
// The schema drifts by file as in the AWS dataset: a column exists in the
// files of its fork day and later, and is null for the fork day's blocks
// before the fork. sha3_uncles, miner, extra_data, logs_bloom and difficulty are
// dictionary-encoded, timestamp and number delta-encoded, the rest plain.
//
// # manifest.json (version 1)
//
// Written last, so an archive without it is incomplete. JSON object:
//
//	version          1; readers refuse other versions (ARCHIVE_MANIFEST_CORRUPT)
//	preset           "demo", "seed", "last-N" or "range-YYYY-MM-DD-N"
//	seed             int64
//	firstDay, days   first date partition, number of days
//	firstBlock, lastBlock
//	firstParentHash  the anchor (0x + 64 hex)
//	lastHash         hash of lastBlock
//	lastTimestamp    unix seconds of lastBlock
//	rows, bytes      totals over files
//	files            [{key, date, rows, bytes, firstBlock, lastBlock}] in block
//	                 order; key is '/'-separated, relative to <out>
//	lastHeader       go-ethereum's JSON encoding of the last header, so the
//	                 node continues the chain (base fee, gas limit, forks)
//	                 without regenerating history
//
// ReadManifest checks: rows = lastBlock-firstBlock+1 = sum of file rows,
// files contiguous from firstBlock, keys local, lastHeader hashes to lastHash
// with number lastBlock and time lastTimestamp.
//
// Example (abridged):
//
//	{"version":1,"preset":"demo","seed":1,"firstDay":"2026-08-01","days":60,
//	 "firstBlock":25657631,"lastBlock":26086569,"firstParentHash":"0x…",
//	 "lastHash":"0x…","lastTimestamp":1790726399,"rows":428939,"bytes":182455778,
//	 "files":[{"key":"v1.0/eth/blocks/date=2026-08-01/part-00000-…-c000.snappy.parquet",
//	           "date":"2026-08-01","rows":7153,"bytes":…,"firstBlock":25657631,"lastBlock":25664783}, …],
//	 "lastHeader":{"parentHash":"0x…","number":"0x18e0ca9", …}}
//
// Crash safety: every Parquet file and the manifest is published by package
// durable: written to ".<name>.<hex>.tmp" in its final directory, fsynced,
// renamed, and the directory fsynced (new date directories with their
// parents); an existing manifest is removed before regeneration starts. A new
// run deletes stale temp files and refuses (ARCHIVE_OUTPUT_NOT_EMPTY) an
// output directory holding archive files this run would not write (another
// preset or seed), so readers never see a mixed archive.
//
// Costs measured on the shared 2-core machine (2026-11-29, seed 1):
//
//	demo  60 files, 428,939 rows, 173.8 MB, 3.6 s
//	seed  4,080 files, 26,086,569 rows, 9.84 GB (9.2 GiB), 4 min 29 s wall,
//	      335 CPU-s, 255 MB RSS (`ethstream gen-archive --preset seed`)
//
// About 370 bytes a row: the five or six random 32-byte hashes per block,
// as 0x-hex strings, take 62 bytes each after Snappy and are 85% of it.
//
// # S3 endpoint
//
// StartS3 serves a directory with gofakes3: bucket = top-level folder,
// path-style requests, ListObjectsV2 (prefix, delimiter, MaxKeys,
// continuation tokens), GET with ranges (the file is seeked, only the range
// is read), HEAD, PUT (durable publish: rename, or link(2) for If-None-Match: *),
// DELETE. A plain GET or HEAD of an object (no conditional header, a
// bytes=N-[M] range or none) is answered before gofakes3, with the same
// headers, the range sent by sendfile(2). A key that resolves outside the
// root through a symbolic link is 403 AccessDenied; a GET or HEAD checks
// the real path of the file it opened. ETags derive from size, mtime and
// key rather than an MD5 of the content. Faults: a seeded fraction of
// requests answered 503 SlowDown or 500 InternalError.
//
// # JSON-RPC node
//
// StartNode continues the archive from lastBlock+1 with parent lastHash:
// post-merge headers 12 s apart, base fee by EIP-1559 from the parent (a
// block is empty while its parent's fee is above 1,000 gwei, so the fee of
// a long run stays bounded: maxNodeBaseFee), WithdrawalsHash = EmptyWithdrawalsHash (empty withdrawals served), blob
// fields and parent beacon root after Cancun, requests hash after Prague,
// and real EIP-1559 transactions whose DeriveSha is the header's
// transactions root (signature values in range but not real signatures;
// "from" is served). Transactions are regenerated from (seed, number,
// branch) on each request instead of being stored. Methods: eth_blockNumber,
// eth_getBlockByNumber (hex, latest, pending, safe = head-32, finalized =
// head-64, earliest = the node's first block), eth_getBlockByHash (blocks
// replaced by a reorg stay retrievable by hash), eth_chainId (0x1),
// eth_syncing, net_version ("1"), web3_clientVersion, and batches, over
// HTTP and websocket, and over websocket eth_subscribe("newHeads") (heads.go:
// each new head's header; a reorg sends its new head only; the time each
// block was announced is kept for freshness, Node.AnnouncedAt;
// DropWebsockets closes every websocket, as a restarting node would). Archive blocks are not served (null). Every mined
// block reports the archive's last total difficulty (its day rebuilt at
// start), size, and the header's fields, so that the JSON-RPC source parses
// the row the archive writer would write for it: Node.ExportArchive writes
// mined blocks as archive files (one per date partition,
// part-00000-node-<first>-<last>-c000.snappy.parquet, the archive's schema
// era of the blocks) through the same row function as GenerateArchive. The head
// advances by one block per BlockInterval/Speed of wall time (computed from
// elapsed time, at most 32 blocks per catch-up step), or only via Mine in
// Manual mode.
package chain
