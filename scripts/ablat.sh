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
. "$(dirname "$0")/lib.sh"
round() {
  local out
  "$1" bench produce -t Lat --count 2000 --inflight 1 >/dev/null 2>&1
  out=$("$1" bench produce -t Lat --count "${COUNT:-20000}" --inflight 1 2>&1 | tail -1)
  printf "%-28s %s\n" "$(basename "$1")" "$(echo "$out" | sed -n 's/.*latency \(p50 [^ ]* p99 [^ ]* p999 [^ ]*\).*/\1/p')"
}
PAUSE=${PAUSE:-1} ab_rounds "$@"
