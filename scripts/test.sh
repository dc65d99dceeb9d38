#!/usr/bin/env bash
# The project's test command (README): the default suite, fast enough for CI
# on 2 cores. Long soaks and full-history benchmarks stay behind flags.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -count=1 -timeout 25m ./...
