#!/usr/bin/env bash
# A/B of produce between gantry builds (docs/BENCHMARKS.md): for each of
# PAIRS rounds, each BIN in turn starts a fresh `gantry dev` on the default
# ports, `gantry bench produce` sends COUNT messages of 1 KiB with INFLIGHT
# in flight, and one line gives the rate, the client's CPU (user+sys), the
# broker's CPU and the latency p50 p99. Builds alternate so that the
# machine's drift falls on all of them.
#
# Usage: scripts/abprod.sh PAIRS BIN...      (env COUNT=1000000 INFLIGHT=4096)
#   DEVFLAGS="--flush SYNC_FLUSH" scripts/abprod.sh 3 /tmp/a /tmp/b   (sync flush)
#   go build -o /tmp/a ./cmd/gantry; git stash; go build -o /tmp/b ./cmd/gantry; git stash pop
#   scripts/abprod.sh 3 /tmp/a /tmp/b
set -uo pipefail
. "$(dirname "$0")/lib.sh"
round() {
  local out rate lat c
  out=$( { /usr/bin/time -f "TIME %U %S" "$1" bench produce -t Bench --count "${COUNT:-1000000}" --inflight "${INFLIGHT:-4096}" 2>&1; } 2>&1 )
  rate=$(echo "$out" | sed -n 's/.* = \([0-9]*\) msgs\/s.*/\1/p')
  lat=$(echo "$out" | sed -n 's/.*p50 \([^ ]*\) p99 \([^ ]*\) .*/\1 \2/p')
  c=$(echo "$out" | awk '/^TIME/{printf "%.2f", $2+$3}')
  printf "%-28s %7s msgs/s  client %5ss  broker %5ss  lat %s\n" "$(basename "$1")" "$rate" "$c" "$(cpu "$dev")" "$lat"
}
ab_rounds "$@"
