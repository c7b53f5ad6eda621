#!/usr/bin/env bash
# The retry-storm benchmark (docs/BENCHMARKS.md, "Retry storm"): a fresh
# `gantry dev` on ports of its own, 1,000,000 messages of 1 KiB produced,
# then PAIRS pairs of push-consumer runs over all of them, each with a new
# group: a healthy run, and a storm run whose handler fails the first
# delivery of every 10th message (the consumer sends it back; its retry is
# due 10 s later, after the run, which counts only the other 900,000).
# Each line gives a run's time, healthy messages per second, and the CPU
# seconds of the consumer and of the broker process; the last line the
# median of the pairs' drops.
#
# Usage: scripts/storm.sh [PAIRS] [COUNT]      (defaults 5, 1000000)
# Run it on an otherwise idle machine; it takes about 30 s a pair.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
pairs=${1:-5}
count=${2:-1000000}
work=$(mktemp -d /tmp/gantry-storm.XXXXXX)
bin=$work/gantry
go build -o "$bin" ./cmd/gantry
ns=127.0.0.1:29877
"$bin" dev --dir "$work/data" --namesrv-listen $ns --namesrv-remoting-listen 127.0.0.1:29876 \
  --broker-listen 127.0.0.1:28081 --broker-remoting-listen 127.0.0.1:20921 --http-listen 127.0.0.1:25557 \
  >"$work/dev.log" 2>&1 &
dev=$!
cleanup() { kill -INT $dev 2>/dev/null && wait $dev 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
sleep 2
"$bin" bench produce -n $ns -t StormTest --count "$count" | tail -1
sleep 5
drops=()
for i in $(seq "$pairs"); do
  for mode in healthy storm; do
    extra=()
    [ $mode = storm ] && extra=(--fail-every 10)
    push_run $dev "$bin" $ns "$count" "storm-$mode-$i-$RANDOM" "${extra[@]}"
    printf '%-7s %6s %7s msgs/s  consumer %ss  broker %.2fs\n' $mode "$secs" "$rate" "$ccpu" "$bcpu"
    if [ $mode = healthy ]; then healthy=$rate; else
      drops+=("$(echo "scale=1; 100 * ($healthy - $rate) / $healthy" | bc)")
    fi
    sleep 13 # the storm's retries fall due outside the next run
  done
done
sorted=$(printf '%s\n' "${drops[@]}" | sort -n)
n=${#drops[@]}
median=$(echo "$sorted" | awk -v n="$n" 'NR == int((n+1)/2) {a=$1} NR == int(n/2)+1 {b=$1} END {printf "%.1f", (a+b)/2}')
echo "storm lower by: $(echo $sorted | tr ' ' '/') %; median $median % (target: at most 20 %)"
