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
run "$BIN" table history "$TABLE" >"$OUT/history.txt"
run head -n 5 "$OUT/history.txt"
run "$BIN" table show "$TABLE" --format csv >"$OUT/table.csv"
run head -n 10 "$OUT/table.csv"
echo "wrote $OUT/batches.csv, $OUT/sources.csv, $OUT/history.txt and $OUT/table.csv" >&2
