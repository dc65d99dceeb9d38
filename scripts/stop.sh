#!/usr/bin/env bash
# Stops the embedded S3 endpoint and node that the phase scripts started, and
# says "stopped" only once the process is gone. A pid file whose process is not
# ours (exited, or the pid was reused) is removed without killing anything.
source "$(dirname "$0")/lib.sh"
status=0
for svc in serve-s3 node; do
  pidfile="$WORK/$svc.pid"
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if ! ours "$svc"; then
    echo "$svc (pid $pid) was not running" >&2
    rm -f "$pidfile"
    continue
  fi
  run kill "$pid"
  for _ in $(seq 1 50); do
    ours "$svc" || break
    sleep 0.1
  done
  if ours "$svc"; then
    run kill -KILL "$pid"
    # A killed process is gone once the kernel has torn it down, which on
    # a loaded machine can take longer than any fixed pause: wait for it
    # (up to 10 s) rather than sleep.
    for _ in $(seq 1 100); do
      ours "$svc" || break
      sleep 0.1
    done
  fi
  if ours "$svc"; then
    echo "error: $svc (pid $pid) is still running" >&2
    status=1
    continue
  fi
  rm -f "$pidfile"
  echo "stopped $svc (pid $pid)" >&2
done
exit $status
