#!/usr/bin/env bash
# Shrink the state to 8 partitions for the live tail.
source "$(dirname "$0")/lib.sh"
run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" --source "$(LIVE_SOURCE)" \
  "${EVOLUTION[@]}" --conf spark.sql.streaming.stateStore.partitions=8 \
  --trigger "$TRIGGER" --max-batches 8 --progress "$PROGRESS/shrink_state.jsonl"
