package demo

// JoinExampleQuery is the README's join of the chain's blocks with their
// transactions (section "Joining blocks with their transactions"): per
// miner and hour, the transactions of the blocks the miner mined and their
// fees in gwei, a stream-stream inner join on the block hash within a
// second of the block's time, then a windowed aggregation over the joined
// rows in append mode (two stateful operators: the join's output
// watermark closes the hours). The sources are chain_blocks and chain_txs.
const JoinExampleQuery = "SELECT b.miner, window(b.block_ts, '1 hour') AS window, count(*) AS txs, " +
	"sum(t.receipt_gas_used * t.receipt_effective_gas_price / 1000000000) AS fees_gwei " +
	"FROM chain_blocks WATERMARK block_ts DELAY OF INTERVAL 10 MINUTES AS b " +
	"JOIN chain_txs WATERMARK block_timestamp DELAY OF INTERVAL 10 MINUTES AS t " +
	"ON b.hash = t.block_hash AND t.block_timestamp BETWEEN b.block_ts AND b.block_ts + INTERVAL 1 SECOND " +
	"GROUP BY b.miner, window(b.block_ts, '1 hour')"
