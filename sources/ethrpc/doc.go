// Package ethrpc is the live block source over Ethereum JSON-RPC: the seeds'
// eth_rpc data source, with a checked seam to the archive, reorg safety and
// resilience against rate-limited public endpoints. It implements
// stream.Source, stream.ReportingSource and stream.AvailableNowSource.
//
// # URI and options
//
//	ethstream run ... --source eth_live=ethrpc:http://127.0.0.1:8545?maxBlocksPerTrigger=20&start_block=26086570&confirmations=0
//
// The URI is the endpoint; its query string holds the options (ParseURI):
//
//	maxBlocksPerTrigger  blocks per batch, default 20
//	start_block          first block, honoured only the first time the source's
//	                     name is seen (no committed offset); afterwards the
//	                     checkpoint wins. Unset/0 = start at the readable head.
//	start_parent_hash    the very first block's parentHash must equal it (the
//	                     archive's last hash), else SEAM_MISMATCH
//	overlap              K: start K blocks before start_block, on purpose (an
//	                     archive that holds them too); the seam check moves
//	                     to block start_block, in whichever batch holds it
//	                     (overlap.go). A query must deduplicate by block:
//	                     pipeline refuses one without
//	confirmations        read only blocks <= head - confirmations (default 0)
//	finality             safe | finalized: read only blocks <= that tag's block
//	endpoints            url1,url2: further endpoints, tried in order on failure
//	maxBatchSize         calls per JSON-RPC batch request (default 100)
//	parallelism          batch requests in flight for one range (default 4)
//	timeout              per request, Go duration (default 10s)
//	maxRetries           retries of one call across endpoints (default 8)
//	reorg                fail (default): a reorganisation of emitted blocks is
//	                     REORG_DETECTED; retract: it is undone (below)
//	reorgDepth           with reorg=retract, the deepest reorganisation undone
//	                     (default 64, at most 4096)
//	maxResponseSize      bytes of one JSON-RPC answer (default 64MiB; KiB,
//	                     MiB, GiB suffixes): a larger answer is
//	                     RPC_RESPONSE_TOO_LARGE naming the endpoint and the
//	                     cap; over HTTP refused unread when its
//	                     Content-Length says so, else cut off at the cap;
//	                     over ws it is the websocket's message limit (the
//	                     newHeads subscription keeps go-ethereum's 32 MiB)
//	table                blocks (default), transactions, logs or token_transfers:
//	                     the rows emitted (below, Tables)
//
// An unknown option is an INVALID_ARGUMENT error. Endpoint URLs appear in
// logs, descriptions and metrics as scheme://host only, because providers put
// API keys in paths and query strings; an endpoint needing its own query
// string goes URL-encoded into endpoints=.
//
// # Offsets
//
// An offset is the last block included and its hash, as canonical compact
// JSON: {"block":26086589,"hash":"0x…"} (lowercase hash, fields in this
// order), so equal positions are byte-identical. A batch (start, end] holds
// blocks start.block+1 .. end.block; the first batch (start nil) holds
// start_block .. end.block, or just end.block when start_block is 0.
//
// With reorg=retract the end offset of a batch that retracts blocks adds the
// common ancestor: {"block":26086591,"hash":"0x…","fork":26086588}; the batch
// (start, end] then retracts start's blocks fork+1 .. start.block and inserts
// blocks fork+1 .. end.block of the chain ending at end.hash.
//
// # Reading a batch and its checks
//
// ReadBatch fetches the range with eth_getBlockByNumber(n, false) calls sent
// as JSON-RPC batch requests of at most maxBatchSize calls; when an endpoint
// answers "batch too large" (go-ethereum's BatchRequestLimit, HTTP 413, or a
// provider's equivalent) the size is halved and kept. A range is split over
// up to parallelism concurrent requests of at least 25 blocks each, because a
// node answers one batch request sequentially. Nothing is emitted
// before every check passed:
//
//   - the first block's parentHash equals the start offset's hash (the seam
//     between batches), or start_parent_hash for the very first batch
//     (SEAM_MISMATCH);
//   - each block's parentHash equals the previous block's hash;
//   - the end block's hash equals the one recorded in the end offset when the
//     batch was planned, so a re-run after a crash reads exactly the planned
//     blocks or fails (REORG_DETECTED).
//
// Rows carry every block column of package ethblock, restricted to the
// projection: number, hash, parent_hash, block_ts (header timestamp in µs),
// miner (lowercase hex of the fee recipient), transaction_count (the length
// of the block's transaction list), gas_used, nonce, sha3_uncles,
// logs_bloom, transactions_root, state_root, receipts_root, extra_data
// (lowercase 0x-hex, widths checked), difficulty and total_difficulty (hex
// quantities of up to 256 bits, as the nearest double, the dataset's type),
// size, gas_limit, base_fee_per_gas (hex quantities that must fit an
// int64) and withdrawals_root. Quantities are validated as go-ethereum's
// hexutil does (0x prefix, no leading zeros). baseFeePerGas,
// withdrawalsRoot and totalDifficulty are null when the block lacks them or
// holds null (before London, before Shanghai; go-ethereum stopped reporting
// total difficulty in v1.14.9); every other field is required and a block
// without it is RPC_BAD_BLOCK. Every row holds the values the archive's row of
// the same block holds (pipeline's TestArchiveAndLiveRowsAgree).
//
// # Tables (table.go)
//
// With table=transactions, logs or token_transfers the source plans,
// checks and retracts blocks exactly as above, and turns each block into
// that table's rows only when it emits it: it reads the block by hash with
// its transactions (eth_getBlockByHash(hash, true)) and its receipts
// (eth_getBlockReceipts(hash)), at most 8 blocks per JSON-RPC batch
// request, checks that they are that block's (hash, number, timestamp,
// transaction_count, each receipt's transaction hash recomputed from the
// decoded transaction, block hash and index), and derives the rows with
// package ethtables, the archive writer's own row function. A block's
// contents never change under its hash, so the rows a retracting batch
// takes back, read again after a crash, are exactly the rows emitted. The
// source's schema is the table's (ethtables.StreamSchema); a projection
// names the table's columns.
//
// # Retracting reorganisations (reorg=retract)
//
// The source follows the head (typically confirmations=0) and stays exact
// through reorganisations up to reorgDepth blocks deep, using the signed rows
// of package stream: a batch retracts the orphaned blocks it emitted (rows
// with Sign -1 and exactly the values emitted, newest first) and then
// inserts the canonical replacements, so a count or sum downstream equals a
// recount of the canonical chain after every batch.
//
// LatestOffset reads, in one batch request, the block at the start offset's
// height and the next blocks. If the start block is still canonical it plans
// as usual. Otherwise it reads the canonical blocks back from that height,
// 8 then 32, 128, ... at a time (reorgs are mostly shallow), down to the
// start of the start's history, and takes the newest one whose hash the
// history holds as the common ancestor (fork); the batch ends at most maxBlocksPerTrigger
// blocks past the fork, and its end offset records fork and the new tip. No
// common ancestor within the history is REORG_DETECTED, naming the block's
// old and new hashes and the depth, found by walking the old chain back by
// eth_getBlockByHash against the canonical chain (at most reorgDepth more
// blocks), or "more than N". The blocks of one plan are read by several
// calls; when they do not form one chain (the head moved meanwhile) the plan
// is read again, at most 3 times, then no batch is planned this trigger.
//
// Before LatestOffset returns an end, it publishes that end's history (below),
// so the history exists before the engine writes the offsets. ReadBatch takes
// the retracted rows from the start's history and the inserted rows from the
// end's history (older blocks of a long catch-up batch are fetched by number
// and must link into it, else REORG_DETECTED): a re-run after a crash
// retracts and re-inserts exactly the same rows even if the chain moved
// again, without reading the chain. Commit(end) deletes every history file
// but end's.
//
// History file (format version 2; version 1 is still read):
// <checkpoint>/sources/<name>/history.<block>.<hash>.json, named by the end
// offset it belongs to: a checkpoint.Log keyed by the end offset (block,
// then hash; other names in the directory are ignored), each file written
// once through the checkpoint's crash-safe publish (write temp, fsync, link,
// fsync dir). A file already present (the same batch planned again after a
// crash) must hold the same bytes (Log.AddOrMatch), or be a version-1 file
// of the same blocks (an older ethstream planned the batch), which is kept.
// One JSON object and a newline:
//
//	{"version":2,"blocks":[{"number":26086571,"hash":"0x…","parent_hash":"0x…",
//	  "block_ts":1764547211000000,"miner":"0x…","transaction_count":180,"gas_used":29999823,
//	  "nonce":"0x0000000000000000","sha3_uncles":"0x…","logs_bloom":"0x…","transactions_root":"0x…",
//	  "state_root":"0x…","receipts_root":"0x…","difficulty":0,"total_difficulty":6.020258576430073e+22,
//	  "size":15856,"extra_data":"0x…","gas_limit":60000000,"base_fee_per_gas":127034,
//	  "withdrawals_root":"0x…"},...]}
//
// Version 1 had the seven fields number .. gas_used only; version 2 adds
// every other block column (package ethblock), after them in this order:
// doubles (difficulty, total_difficulty) in Go's shortest round-trip form,
// null for a null (total_difficulty, base_fee_per_gas, withdrawals_root
// only). A version-2 block has all twenty fields, or only the first seven:
// a block carried over from a version-1 history, whose other columns a
// retraction that projects them reads by hash (eth_getBlockByHash: a
// block's values never change under its hash), keeping the seven recorded.
// blocks are the last emitted blocks of the chain ending at the file's
// offset, oldest first, at most reorgDepth+1 (the tip and reorgDepth
// ancestors, so a reorg reorgDepth deep still finds its ancestor), never
// before the source's first block: contiguous numbers, each parent_hash the
// previous hash, the last one the offset's block and hash. Fields in this
// order, integers in decimal, hashes and hex data lowercase 0x-hex, values
// as the block columns hold them (block_ts in µs). An unknown version, a missing or
// unknown field, or a file that breaks any of these rules is
// CHECKPOINT_CORRUPT with its path. A committed offset without a history (a
// checkpoint that ran without reorg=retract) gets one on first use: the
// blocks from max(start_block, block-reorgDepth) to the committed block of
// the chain ending at its hash, or the committed block alone without
// start_block.
//
// Each progress event reports, in sources[].metrics: reorgs, a JSON array of
// the reorganisations the batch undid ({"depth","ancestor","oldTip",
// "newTip","blocksRetracted","blocksInserted"}; absent when none, see
// ParseReorgs), and the totals since the source was opened: reorgsTotal,
// blocksRetractedTotal, reorgDepthMax.
//
// # Resilience
//
// Each request has a timeout. 429, 5xx, 408, timeouts and connection errors
// are retried with exponential backoff (100 ms doubling to 10 s, jitter in
// [d/2, d]) or the server's Retry-After if longer (captured by an
// http.RoundTripper, since rpc.HTTPError drops headers). A 429 or a JSON-RPC
// rate-limit error (-32005) also turns on an AIMD request rate: 10 req/s on
// the first throttle, halved on each further one (floor 0.5 req/s), +1 req/s
// per success, off again above 50 req/s. With several endpoints a failure
// fails over to the next; the first pass over the endpoints does not sleep.
// When maxRetries is spent the call fails with RPC_UNAVAILABLE. All waits use
// the engine's injected clock. Metrics (progress event sources[].metrics):
// requests, retries, throttles, failovers, batchSplits, batchSize,
// latencyP50Ms, latencyMaxMs (over the last 512 requests), requestRate,
// activeEndpoint, head. ReportLatestOffset is the readable head.
//
// # Head following (subscription.go)
//
// With subscribe=auto (the default) and a ws:// or wss:// endpoint, Open
// starts a goroutine that dials that endpoint on a connection of its own and
// calls eth_subscribe("newHeads"); each notification arrives on DataReady
// (stream.DataNotifier), which wakes trigger realTime. The notification is a
// hint only: LatestOffset still asks for the head and ReadBatch reads every
// block by number and checks it, so a notification lost, duplicated or late
// (the subscriber queue of a busy node drops them) delays a batch to the
// trigger's fallback poll and never changes what is emitted. A subscription
// that fails (dial error, connection closed) is redialled after 100 ms,
// doubling to 5 s on the engine's clock, reset after a subscription that
// worked; every successful subscription wakes the engine once. Metrics:
// subscription (up/down), subscribes, headNotifications, notifiedHead.
// freshnessMs (freshness.go) is the last committed batch's time from the
// source learning its end block was readable (the notification's arrival,
// or the LatestOffset that planned it when no notification came first) to
// Commit. Over http(s), or with subscribe=off, the source polls as before.
//
// # Following a real public endpoint
//
// To continue the public AWS archive live from mainnet (block numbers are an
// example: use the archive's manifest):
//
//	ethstream run --checkpoint ck --table tbl \
//	  --source 's3_backfill=s3archive:s3://aws-public-blockchain/v1.0/eth/blocks?region=us-east-2&anonymous=true' \
//	  --source 'eth_live=ethrpc:https://ethereum-rpc.publicnode.com?start_block=26086570&start_parent_hash=0x<archive last hash>&confirmations=12&maxBlocksPerTrigger=20&endpoints=https://eth.llamarpc.com' \
//	  --trigger processing-time=60s
//
// or finality=finalized instead of confirmations for blocks that cannot be
// reorganised at all (about 13 minutes behind the head). Public endpoints
// throttle: the source backs off and slows down by itself, and the metrics
// show it.
//
// # Why confirmations matter
//
// The head of a chain can be replaced by a reorganisation. Since the merge
// (block 15,537,394) mainnet reorgs are rare and shallow, almost always one
// block, when a proposer's block arrives late; a block is "safe" once the
// attestations of its slot make a reorg very unlikely, and "finalized" after
// two epochs (64 slots, ~12.8 min), after which it cannot be reverted
// without slashing a third of all stake. A block this source emitted is
// aggregated and merged into the sink; if it is later orphaned the sink keeps
// its counts (unless reorg=retract takes them back). The source never emits
// from a changed chain: a reorg deeper than the confirmations (and, with
// reorg=retract, deeper than reorgDepth) is REORG_DETECTED, not silently
// mixed data. With
// confirmations greater than the reorg depth (or finality=safe|finalized) a
// reorg is invisible to the query. The embedded node (ethstream node) never
// reorganises unless told to, so its default is 0; on mainnet use 12 or more,
// or finality=finalized.
//
// # Concurrency
//
// A Source is used by the engine from one goroutine; Metrics and
// ReportLatestOffset are safe to call concurrently with it.
package ethrpc
