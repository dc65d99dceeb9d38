#!/usr/bin/env bash
# Shared by the phase scripts: where things live, how to build the binary, and
# how to start the embedded S3 endpoint and JSON-RPC node.
#
# Every script prints each command before running it, builds and servers
# included. The scripts work in their own directory, WORK (default
# work/scripts), so they never share a checkpoint with `ethstream demo`
# (which uses work/). A server is reused only if these scripts started it
# (its pid file names a live process of ours); a port held by anything else
# is refused.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${WORK:-$ROOT/work/scripts}"
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

mkdir -p "$WORK" # --progress creates $PROGRESS

# shq prints its arguments as a shell reads them back: one holding a character
# the shell treats specially (the & and ? of a source URI, a space, ...) in
# single quotes, so that a printed command pasted into a terminal runs as is.
shq() {
  local out=() a q="'"
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
      out+=("$a")
    else
      out+=("$q${a//$q/$q\\$q$q}$q")
    fi
  done
  printf '%s' "${out[*]}"
}

# run prints a command, then runs it.
run() {
  printf '\n$ %s\n' "$(shq "$@")" >&2
  "$@"
}

build() {
  if [ ! -x "$BIN" ] || [ -n "${REBUILD:-}" ]; then
    mkdir -p "$(dirname "$BIN")"
    printf '\n$ (cd %s && go build -o %s ./cmd/ethstream)\n' "$ROOT" "$BIN" >&2
    (cd "$ROOT" && go build -o "$BIN" ./cmd/ethstream)
  fi
}

up() { (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; }

# ours NAME succeeds if WORK/NAME.pid names a live process running this
# binary's NAME subcommand.
ours() {
  local pidfile="$WORK/$1.pid" pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- " $1 "
}

# wait_port waits until something listens on host:port (up to 120 s: a node
# loading a large archive on a busy machine takes a while), and fails early if
# the server NAME exited.
wait_port() {
  local hostport=$1 name=$2 i
  for i in $(seq 1 1200); do
    if up "$hostport"; then return 0; fi
    if ! ours "$name"; then
      echo "error: $name exited before listening on $hostport; see $WORK/$name.log:" >&2
      tail -n 5 "$WORK/$name.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "error: nothing listens on $hostport" >&2
  return 1
}

# start NAME ADDR ARGS... starts `ethstream NAME ARGS...` in the background
# (printed first), records its own pid (not a subshell's) and waits for ADDR.
# A server of ours already up is reused; a port held by another process is
# refused.
start() {
  local name=$1 addr=$2
  shift 2
  if ours "$name" && up "$addr"; then
    echo "reusing $name (pid $(cat "$WORK/$name.pid")) on $addr" >&2
    return 0
  fi
  if up "$addr"; then
    local var=S3_ADDR
    [ "$name" = node ] && var=NODE_ADDR
    echo "error: PORT_IN_USE: $addr is held by a process these scripts did not start. To fix: stop that process, or pick a free address with $var=127.0.0.1:PORT" >&2
    exit 1
  fi
  printf '\n$ %s >%s 2>&1 &\n' "$(shq "$BIN" "$name" "$@")" "$(shq "$WORK/$name.log")" >&2
  "$BIN" "$name" "$@" >"$WORK/$name.log" 2>&1 &
  echo $! >"$WORK/$name.pid"
  wait_port "$addr" "$name"
}

# endpoints starts serve-s3 and node in the background unless ours are up.
endpoints() {
  build
  if [ ! -f "$ARCHIVE/manifest.json" ]; then
    echo "error: no archive in $ARCHIVE: run scripts/01_generate.sh first" >&2
    exit 1
  fi
  start serve-s3 "$S3_ADDR" --root "$WORK/s3" --addr "$S3_ADDR"
  start node "$NODE_ADDR" --archive "$ARCHIVE" --addr "$NODE_ADDR" --initial-blocks 1000
}


S3_SOURCE() {
  echo "s3_backfill=s3archive:s3://$BUCKET/v1.0/eth/blocks?endpoint=http://$S3_ADDR&region=us-east-2&anonymous=true&maxFilesPerTrigger=5"
}

# LIVE_SOURCE continues the archive: LAST_BLOCK and LAST_HASH come from its
# manifest.json, as in the README.
LIVE_SOURCE() {
  local LAST_BLOCK LAST_HASH
  eval "$("$BIN" archive info "$ARCHIVE" --env)"
  echo "eth_live=ethrpc:http://$NODE_ADDR?maxBlocksPerTrigger=20&start_block=$((LAST_BLOCK + 1))&confirmations=0&start_parent_hash=$LAST_HASH"
}
