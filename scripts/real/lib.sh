#!/usr/bin/env bash
# The phases against the real public bucket and a real JSON-RPC endpoint.
# Not run in CI against them (this needs the internet): demo/scripts_test.go
# runs them offline, against the embedded S3 endpoint and node in their place
# (S3_OPTIONS, RPC_URL, TRIGGER). Set RPC_URL to your endpoint (an API key in
# the URL is never printed by ethstream), and optionally RPC_FALLBACK.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="${WORK:-$ROOT/work-real}"
BIN="${ETHSTREAM_BIN:-$WORK/bin/ethstream}"
RPC_URL="${RPC_URL:-https://ethereum-rpc.publicnode.com}"
CKPT="$WORK/checkpoint"; TABLE="$WORK/table"; PROGRESS="$WORK/progress"
EVOLUTION=(--conf spark.sql.streaming.queryEvolution.enableSourceEvolution=true
           --conf spark.sql.streaming.offsetLog.formatVersion=2)
mkdir -p "$WORK" "$PROGRESS"
run() { printf '\n$ %s\n' "$*" >&2; "$@"; }
if [ ! -x "$BIN" ]; then mkdir -p "$(dirname "$BIN")"; run go -C "$ROOT" build -o "$BIN" ./cmd/ethstream; fi

# The public bucket's location options (another S3 endpoint: endpoint=URL&...).
S3_OPTIONS="${S3_OPTIONS:-region=us-east-2&anonymous=true}"
S3_SOURCE="s3_backfill=s3archive:s3://aws-public-blockchain/v1.0/eth/blocks?$S3_OPTIONS&maxFilesPerTrigger=${MAX_FILES:-365}"
# The live phases' trigger: a mainnet block every 12 s.
TRIGGER="${TRIGGER:-processing-time=12s}"

# The transactions query (07, 08): fees per hour and transaction type, on a
# checkpoint and table of its own.
TX_CKPT="$WORK/tx/checkpoint"; TX_TABLE="$WORK/tx/table"
TX_SOURCE="s3_backfill=s3archive:s3://aws-public-blockchain/v1.0/eth/transactions?$S3_OPTIONS&maxFilesPerTrigger=${TX_MAX_FILES:-30}"
TX_QUERY="SELECT window(block_timestamp, '1 hour') AS window, transaction_type, count(*) AS txs, sum(receipt_gas_used * receipt_effective_gas_price / 1000000000) AS fees_gwei FROM blocks GROUP BY window(block_timestamp, '1 hour'), transaction_type"
TX_FLAGS=(--query "$TX_QUERY" --with-watermark "block_timestamp, 2 hours")

# The live source starts one block past the archive's last block, chained to its hash:
# both are read from the table the backfill wrote (the newest archive window's blocks).
LIVE_SOURCE() {
  : "${START_BLOCK:?set START_BLOCK to the archive last block + 1 (see 02_backfill.sh output)}"
  : "${START_PARENT_HASH:?set START_PARENT_HASH to the archive last block hash}"
  local fallback=""
  [ -n "${RPC_FALLBACK:-}" ] && fallback="&endpoints=$RPC_FALLBACK"
  echo "eth_live=ethrpc:$RPC_URL?start_block=$START_BLOCK&start_parent_hash=$START_PARENT_HASH&confirmations=${CONFIRMATIONS:-12}&maxBlocksPerTrigger=20$fallback"
}
