#!/usr/bin/env bash
# A/B of one send at a time between gantry builds (docs/BENCHMARKS.md):
# for each of PAIRS rounds, each BIN in turn starts a fresh `gantry dev` on
# the default ports, warms up with 2,000 sends, then times COUNT sends of
# 1 KiB one at a time (`gantry bench produce --inflight 1`); one line gives
# the latency p50, p99 and p999. Builds alternate so that the machine's
# drift falls on all of them.
#
# Usage: scripts/ablat.sh PAIRS BIN...      (env COUNT=20000)
set -uo pipefail
pairs=$1
shift
. "$(dirname "$0")/lib.sh"
for _ in $(seq "$pairs"); do
  for bin in "$@"; do
    dev_start "$bin"
    "$bin" bench produce -t Lat --count 2000 --inflight 1 >/dev/null 2>&1
    out=$("$bin" bench produce -t Lat --count "${COUNT:-20000}" --inflight 1 2>&1 | tail -1)
    dev_stop
    printf "%-28s %s\n" "$(basename "$bin")" "$(echo "$out" | sed -n 's/.*latency \(p50 [^ ]* p99 [^ ]* p999 [^ ]*\).*/\1/p')"
    sleep 1
  done
done
