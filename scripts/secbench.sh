#!/usr/bin/env bash
# TLS + authentication against plaintext without it (docs/BENCHMARKS.md,
# "Security's cost"): for each of PAIRS rounds, a fresh `gantry dev` and
# then a fresh `gantry dev --tls --auth`, each on the default ports, take
# `gantry bench produce` of COUNT messages of 1 KiB with INFLIGHT in
# flight (the second over TLS, every call signed by the admin user dev
# prints). One line a run; the last line the median of the rounds' ratios.
#
# Usage: scripts/secbench.sh [PAIRS]      (default 5; env COUNT=1000000 INFLIGHT=4096)
# Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
pairs=${1:-5}
work=$(mktemp -d /tmp/gantry-secbench.XXXXXX)
trap 'rm -rf "$work"' EXIT
bin=$work/gantry
go build -o "$bin" ./cmd/gantry
produce() {
  "$bin" bench produce -t Bench --count "${COUNT:-1000000}" --inflight "${INFLIGHT:-4096}" "$@" 2>&1 |
    sed -n 's/.* = \([0-9]*\) msgs\/s.*/\1/p'
}
ratios=()
for i in $(seq "$pairs"); do
  DEVFLAGS="" dev_start "$bin"
  plain=$(produce)
  dev_stop
  sleep 2
  DEVFLAGS="--tls --auth" dev_start "$bin"
  ca=$(sed -n 's/.*gantry admin clusterList -n [^ ]* --tls-ca \([^ ]*\).*/\1/p' "$devdir/dev.log")
  keys=$(sed -n 's/.*export GANTRY_ACCESS_KEY=\([^ ]*\) GANTRY_SECRET_KEY=\([^ ]*\).*/\1 \2/p' "$devdir/dev.log")
  secure=$(produce --tls-ca "$ca" --access-key "${keys% *}" --secret-key "${keys#* }")
  dev_stop
  sleep 2
  ratio=$(echo "scale=3; $secure / $plain" | bc)
  ratios+=("$ratio")
  printf 'round %d: plaintext %7s msgs/s   TLS + auth %7s msgs/s   ratio %s\n' "$i" "$plain" "$secure" "$ratio"
done
printf 'median ratio of %d rounds: %s\n' "$pairs" "$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')"
