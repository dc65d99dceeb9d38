#!/usr/bin/env bash
# Phase 0: generate the synthetic archive in the AWS public-blockchain layout.
source "$(dirname "$0")/lib.sh"
build
if [ -n "${DAYS:-}" ]; then
  run "$BIN" gen-archive --out "$ARCHIVE" --days "$DAYS"   # reduced scale: the last DAYS days
else
  run "$BIN" gen-archive --out "$ARCHIVE" --preset "$PRESET"
fi
