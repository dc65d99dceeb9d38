#!/usr/bin/env bash
# Add the live source; START_BLOCK and START_PARENT_HASH continue the archive.
source "$(dirname "$0")/lib.sh"
run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" --source "$S3_SOURCE" --source "$(LIVE_SOURCE)" \
  "${EVOLUTION[@]}" --trigger "$TRIGGER" --max-batches 16 --progress "$PROGRESS/add_live.jsonl"
