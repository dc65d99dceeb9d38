#!/usr/bin/env bash
# Phase 0: generate the synthetic archive in the AWS public-blockchain layout.
source "$(dirname "$0")/lib.sh"
build
run "$BIN" gen-archive --out "$ARCHIVE" --preset "$PRESET"
