#!/usr/bin/env bash
# Phase 5: the proof, from the query's own records: CSVs, the checkpoint, the table.
source "$(dirname "$0")/lib.sh"
build
OUT="${OUT:-$WORK/results}"
phases=()
for p in backfill add_live retire_archive shrink_state; do
  [ -f "$PROGRESS/$p.jsonl" ] && phases+=(--phase "$p=$PROGRESS/$p.jsonl")
done
run "$BIN" progress --out "$OUT" "${phases[@]}"
run "$BIN" checkpoint inspect "$CKPT" --json
run "$BIN" table history "$TABLE" | tail -n 5
run "$BIN" table show "$TABLE" --format csv | head -n 10
echo "wrote $OUT/batches.csv and $OUT/sources.csv" >&2
