#!/usr/bin/env bash
# Phase 1: backfill the archive with wide state (200 partitions), trigger availableNow.
source "$(dirname "$0")/lib.sh"
endpoints
run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" \
  --source "$(S3_SOURCE)" \
  "${EVOLUTION[@]}" --conf spark.sql.shuffle.partitions=200 \
  --trigger available-now --progress "$PROGRESS/backfill.jsonl"
run "$BIN" checkpoint inspect "$CKPT"
