#!/usr/bin/env bash
# A/B of consume between gantry builds (docs/BENCHMARKS.md): for each of
# PAIRS rounds, each BIN in turn starts a fresh `gantry dev` on the default
# ports, `gantry bench produce` stores COUNT messages of 1 KiB, and `gantry
# bench consume` reads them back; one line gives the consume rate, the
# consumer's CPU (user+sys), the broker's CPU while it served the pulls
# and whether the consumer saw every message. Builds alternate so that the
# machine's drift falls on all of them.
#
# Usage: scripts/abcons.sh PAIRS BIN...      (env COUNT=1000000)
set -uo pipefail
. "$(dirname "$0")/lib.sh"
count=${COUNT:-1000000}
round() {
  local out b0 b1 rate c seen
  "$1" bench produce -t Bench --count "$count" --inflight 4096 >/dev/null 2>&1
  sleep 2
  b0=$(cpu "$dev")
  out=$( { /usr/bin/time -f "TIME %U %S" "$1" bench consume -t Bench --count "$count" 2>&1; } 2>&1 )
  b1=$(cpu "$dev")
  rate=$(echo "$out" | sed -n 's/.* = \([0-9]*\) msgs\/s.*/\1/p')
  c=$(echo "$out" | awk '/^TIME/{printf "%.2f", $2+$3}')
  seen=$(echo "$out" | grep -o 'none lost, 0 duplicates' | head -1)
  printf "%-28s %7s msgs/s  consumer %5ss  broker %5.2fs  %s\n" "$(basename "$1")" "$rate" "$c" "$(echo "$b1 - $b0" | bc)" "${seen:-LOST OR DUPLICATED}"
}
ab_rounds "$@"
