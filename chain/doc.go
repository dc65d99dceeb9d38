// Package chain is ethstream's synthetic, deterministic, mainnet-like
// Ethereum chain: the model of its history (BuildDay, Preset) and of its
// continuation (Next). The services that expose it live apart: the archive
// writer in package chain/archivegen (the AWS public-blockchain Parquet
// layout and its manifest), the JSON-RPC node in package chain/ethnode; the
// embedded S3 endpoint that serves an archive is the general package
// storage/s3serve (docs/contracts.md, Data).
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
// hashes. Only hashing is sequential: archivegen.Generate builds days in
// parallel, links and hashes them in day order in one goroutine, and encodes
// them in parallel.
//
// # The continuation
//
// Next derives the block after any header of the chain, 12 s later:
// post-merge, base fee by EIP-1559 from the parent (a block is empty while
// its parent's fee is above 1,000 gwei, so the fee of a long run stays
// bounded: MaxNextBaseFee), WithdrawalsHash = EmptyWithdrawalsHash, blob
// fields and parent beacon root after Cancun, requests hash after Prague,
// and a body (NextBody) whose transactions root, receipts root and logs
// bloom are the header's. Bodies are regenerated from (seed, header,
// branch, transaction count) instead of being stored.
//
// # Bodies
//
// A block's body (body.go) is its transactions, their senders and their
// receipts with logs, derived from the header's number, time, base fee,
// gas used and transaction count; the header's transactions root and
// receipts root are types.DeriveSha of them and its logs bloom
// types.MergeBloom of the receipts. The gas used of the transactions adds
// up to the header's (each at least 21,000); transaction types follow the
// forks (legacy only before Berlin, with EIP-155 v from Spurious Dragon;
// then 5% access-list; from London 75% EIP-1559, 20% legacy, 5%
// access-list), receipts hold a state root before Byzantium and a status
// after it (2% failed, without logs). About 30% of transactions are ERC-20
// transfer() calls with one Transfer log, and half the logs of other
// contract calls are Transfers too, from 64 token contracts (Zipf), so the
// token_transfers table has rows. Signatures are valid-range values, not
// real signatures: senders are served, not recovered.
//
// Bodies are lazy: a history day's headers carry seeded placeholder roots
// and a sparse bloom unless Day.AddBodies derives its bodies (the archive
// generator does so only when a transaction table is asked for), because a
// body costs about 20 µs of CPU a transaction and the last day of history
// holds some 1.4 million (BenchmarkDayBodies). A day with bodies therefore
// has other block hashes than the same day without.
package chain
