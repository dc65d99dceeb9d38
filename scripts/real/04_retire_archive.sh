#!/usr/bin/env bash
# Retire the archive, then show that its name cannot come back.
source "$(dirname "$0")/lib.sh"
run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" --source "$(LIVE_SOURCE)" \
  "${EVOLUTION[@]}" --trigger "$TRIGGER" --max-batches 8 --progress "$PROGRESS/retire_archive.jsonl"
if run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" --source "$(LIVE_SOURCE)" --source "$S3_SOURCE" \
  "${EVOLUTION[@]}" --trigger once; then
  echo "error: the reuse of a tombstoned name was accepted" >&2; exit 1
fi
