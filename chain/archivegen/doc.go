// Package archivegen writes the synthetic chain (package chain) as an
// archive in the AWS public-blockchain dataset's layout, Parquet files by
// date plus a manifest, and reads that manifest back (ReadManifest): the
// input of ethstream gen-archive, of the s3archive source's tests and of
// the node (package chain/ethnode), which continues the archive's chain.
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
// # The other tables (gen-archive --tables)
//
// With Options.Tables the days' bodies are derived (chain.Day.AddBodies:
// the blocks' transactions root, receipts root and logs bloom become the
// bodies', so the block hashes differ from a blocks-only archive's) and
// each day also gets, per table,
//
//	<out>/v1.0/eth/<table>/date=YYYY-MM-DD/part-00000-<uuid>-c000.snappy.parquet
//
// uuid a SHA-1 UUID of "ethstream/<seed>/<table>/<date>", Snappy, schema
// "spark_schema", a row group per 131,072 rows, the AWS dataset's columns
// in its order (tables.go: txRow, logRow, tokenTransferRow):
//
//	transactions     hash, nonce, transaction_index, from_address, to_address (null: creation),
//	                 value double, gas, gas_price, input, receipt_cumulative_gas_used,
//	                 receipt_gas_used, receipt_contract_address (null unless creation),
//	                 receipt_status (null before Byzantium), block_timestamp TIMESTAMP(MICROS),
//	                 block_number, block_hash, max_fee_per_gas, max_priority_fee_per_gas
//	                 (null unless EIP-1559), transaction_type, receipt_effective_gas_price
//	logs             log_index, transaction_hash, transaction_index, address, data,
//	                 topics (array<string>: group topics (LIST) { repeated group list
//	                 { required binary element (STRING) } }), block_timestamp, block_number, block_hash
//	token_transfers  token_address, from_address, to_address, value double, transaction_hash,
//	                 log_index, block_timestamp, block_number, block_hash
//
// Integers are int64, hashes, addresses and byte strings lowercase 0x-hex.
// A token transfer is an ERC-20 Transfer log (three topics, 32-byte data).
// The rows of one day are streamed block by block (each body made once for
// all tables), so memory does not grow with a day's transactions.
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
//	tables           optional (absent for blocks only; readers of the field's
//	                 absence are unchanged): {"transactions": {rows, bytes,
//	                 files}, ...}, a table's files one per blocks file over the
//	                 same blocks and date, rows the table's
//
// ReadManifest checks: rows = lastBlock-firstBlock+1 = sum of file rows,
// files contiguous from firstBlock, keys local, lastHeader hashes to lastHash
// with number lastBlock and time lastTimestamp; each table's files match
// the blocks files and its rows add up.
//
// An archive extended with a node's next blocks (ethnode.Extend, `ethstream
// archive extend`) gains the node's files
// (part-00000-node-<first>-<last>-c000.snappy.parquet, so a date may hold
// two files, each table's likewise) and a manifest rewritten last, checked
// as ReadManifest checks: its lastBlock, lastHash and lastHeader are then
// the node's last exported block's. The files are staged in _extend/ and
// committed by a journal (extend.go: the extension journal's format and
// why any crash leaves the archive before or after, or completable).
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
// With every table (2026-12-06, seed 1, `gen-archive --days 1 --from
// 2016-07-01 --tables all`): 6,146 blocks, 137,502 transactions (24.2 MB),
// 49,294 logs (10.7 MB), 27,757 token transfers (3.4 MB), 3.4 CPU-s, 177 MB
// RSS: about 25 µs of CPU a transaction, bodies derived twice (roots, then
// rows) and three tables encoded. The blocks-only presets are unchanged
// (no body is derived). The last day of history holds some 1.4 million
// transactions, about 35 CPU-s.
package archivegen
