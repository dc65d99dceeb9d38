#!/usr/bin/env bash
# Stops the embedded S3 endpoint and node that the phase scripts started.
source "$(dirname "$0")/lib.sh"
for svc in serve-s3 node; do
  if [ -f "$WORK/$svc.pid" ]; then
    kill "$(cat "$WORK/$svc.pid")" 2>/dev/null || true
    rm -f "$WORK/$svc.pid"
    echo "stopped $svc" >&2
  fi
done
