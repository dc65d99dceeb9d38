#!/usr/bin/env bash
# A transactions query: backfill the archive's transactions table (fees per hour
# and transaction type, on a checkpoint and table of its own). The table is the
# chain's every transaction, billions of rows and hundreds of GB of Parquet, read
# TX_MAX_FILES daily files a batch; stop and resume it at will (Ctrl-C, rerun).
source "$(dirname "$0")/lib.sh"
run "$BIN" run --checkpoint "$TX_CKPT" --table "$TX_TABLE" --source "$TX_SOURCE" "${TX_FLAGS[@]}" \
  "${EVOLUTION[@]}" --conf spark.sql.shuffle.partitions=200 \
  --trigger available-now --progress "$PROGRESS/tx_backfill.jsonl"
