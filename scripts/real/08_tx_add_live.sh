#!/usr/bin/env bash
# Add the live source to the transactions query: the node's transactions
# (table=transactions) from START_BLOCK, chained to START_PARENT_HASH, as 03 does
# for blocks. Run it once 07 has read the whole table: rows of the archive read
# after the live source moved the watermark would be late, and dropped.
source "$(dirname "$0")/lib.sh"
run "$BIN" run --checkpoint "$TX_CKPT" --table "$TX_TABLE" --source "$TX_SOURCE" \
  --source "$(LIVE_SOURCE)&table=transactions" "${TX_FLAGS[@]}" \
  "${EVOLUTION[@]}" --trigger "$TRIGGER" --max-batches 8 --progress "$PROGRESS/tx_add_live.jsonl"
run "$BIN" table show "$TX_TABLE" | sort | tail -n 4
