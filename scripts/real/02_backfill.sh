#!/usr/bin/env bash
# Backfill the public archive (about 4,000 daily files) with 200 state partitions.
source "$(dirname "$0")/lib.sh"
run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" --source "$S3_SOURCE" \
  "${EVOLUTION[@]}" --conf spark.sql.shuffle.partitions=200 \
  --trigger available-now --progress "$PROGRESS/backfill.jsonl"
echo "the archive's last block and hash: look at the newest file of the archive, e.g." >&2
echo "  aws s3 ls --no-sign-request s3://aws-public-blockchain/v1.0/eth/blocks/ | tail -n 1" >&2
