#!/usr/bin/env bash
# The query's own records as CSVs.
source "$(dirname "$0")/lib.sh"
phases=()
for p in backfill add_live retire_archive shrink_state; do
  [ -f "$PROGRESS/$p.jsonl" ] && phases+=(--phase "$p=$PROGRESS/$p.jsonl")
done
run "$BIN" progress --out "$WORK/results" "${phases[@]}"
run "$BIN" checkpoint inspect "$CKPT" --json
