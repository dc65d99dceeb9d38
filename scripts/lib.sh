#!/usr/bin/env bash
# Shared by the phase scripts: where things live, how to build the binary, and
# how to start the embedded S3 endpoint and JSON-RPC node if they are not up.
# Every script prints each ethstream command before running it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${WORK:-$ROOT/work}"
BIN="${ETHSTREAM_BIN:-$WORK/bin/ethstream}"
S3_ADDR="${S3_ADDR:-127.0.0.1:9000}"
NODE_ADDR="${NODE_ADDR:-127.0.0.1:8545}"
PRESET="${PRESET:-demo}"
BUCKET=aws-public-blockchain
ARCHIVE="$WORK/s3/$BUCKET"
CKPT="$WORK/checkpoint"
TABLE="$WORK/table"
PROGRESS="$WORK/progress"
EVOLUTION=(--conf spark.sql.streaming.queryEvolution.enableSourceEvolution=true
           --conf spark.sql.streaming.offsetLog.formatVersion=2)

mkdir -p "$WORK" "$PROGRESS"

# run prints a command, then runs it.
run() {
  printf '\n$ %s\n' "$*" >&2
  "$@"
}

build() {
  if [ ! -x "$BIN" ] || [ -n "${REBUILD:-}" ]; then
    mkdir -p "$(dirname "$BIN")"
    (cd "$ROOT" && go build -o "$BIN" ./cmd/ethstream)
  fi
}

# wait_port waits until something listens on host:port.
wait_port() {
  local hostport=$1 i
  for i in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/${hostport%:*}/${hostport#*:}") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "error: nothing listens on $hostport" >&2
  return 1
}

up() { (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; }

# endpoints starts serve-s3 and node in the background unless already up.
endpoints() {
  build
  if [ ! -f "$ARCHIVE/manifest.json" ]; then
    echo "error: no archive in $ARCHIVE: run scripts/01_generate.sh first" >&2
    exit 1
  fi
  if ! up "$S3_ADDR"; then
    run "$BIN" serve-s3 --root "$WORK/s3" --addr "$S3_ADDR" >"$WORK/serve-s3.log" 2>&1 &
    echo $! >"$WORK/serve-s3.pid"
    wait_port "$S3_ADDR"
  fi
  if ! up "$NODE_ADDR"; then
    run "$BIN" node --archive "$ARCHIVE" --addr "$NODE_ADDR" --initial-blocks 1000 >"$WORK/node.log" 2>&1 &
    echo $! >"$WORK/node.pid"
    wait_port "$NODE_ADDR"
  fi
}

# manifest_field prints a top-level number or string of the archive manifest.
manifest_field() {
  sed -n "s/.*\"$1\": *\"\{0,1\}\([^\",}]*\)\"\{0,1\}.*/\1/p" "$ARCHIVE/manifest.json" | head -n1
}

S3_SOURCE() {
  echo "s3_backfill=s3archive:s3://$BUCKET/v1.0/eth/blocks?endpoint=http://$S3_ADDR&region=us-east-2&anonymous=true&maxFilesPerTrigger=5"
}

LIVE_SOURCE() {
  local last hash
  last=$(manifest_field lastBlock)
  hash=$(manifest_field lastHash)
  echo "eth_live=ethrpc:http://$NODE_ADDR?maxBlocksPerTrigger=20&start_block=$((last + 1))&confirmations=0&start_parent_hash=$hash"
}
