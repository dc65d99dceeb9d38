#!/usr/bin/env bash
# Phase 4: restart with 8 state partitions: a REPARTITION control batch, then the live tail.
source "$(dirname "$0")/lib.sh"
endpoints
run "$BIN" run --checkpoint "$CKPT" --table "$TABLE" \
  --source "$(LIVE_SOURCE)" \
  "${EVOLUTION[@]}" --conf spark.sql.streaming.stateStore.partitions=8 \
  --trigger processing-time=50ms --max-batches 8 --progress "$PROGRESS/shrink_state.jsonl"
run "$BIN" checkpoint inspect "$CKPT"
