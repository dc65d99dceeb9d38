#!/usr/bin/env bash
# Phase 2: add the named live source on the same checkpoint; the archive re-reads nothing.
source "$(dirname "$0")/lib.sh"
endpoints
run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" \
  --source "$(S3_SOURCE)" --source "$(LIVE_SOURCE)" \
  "${EVOLUTION[@]}" \
  --trigger processing-time=50ms --max-batches 16 --progress "$PROGRESS/add_live.jsonl"
run "$BIN" checkpoint inspect "$CKPT"
