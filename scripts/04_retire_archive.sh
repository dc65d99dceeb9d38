#!/usr/bin/env bash
# Phase 3: retire the archive (its name is tombstoned, its state stays until the
# watermark closes its windows), then show that re-adding the name is refused.
source "$(dirname "$0")/lib.sh"
endpoints
run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" \
  --source "$(LIVE_SOURCE)" \
  "${EVOLUTION[@]}" \
  --trigger processing-time=50ms --max-batches 8 --progress "$PROGRESS/retire_archive.jsonl"
run "$BIN" checkpoint inspect "$CKPT"
echo ">>> re-adding the retired name must fail with TOMBSTONE_SOURCE_NAME_REUSE:" >&2
if run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" \
  --source "$(LIVE_SOURCE)" --source "$(S3_SOURCE)" \
  "${EVOLUTION[@]}" --trigger once; then
  echo "error: the reuse of a tombstoned name was accepted" >&2
  exit 1
fi
