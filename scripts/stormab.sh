#!/usr/bin/env bash
# The retry-storm benchmark (scripts/storm.sh) as an A/B between two gantry
# builds: a `gantry dev` of each on ports of its own, 1,000,000 messages
# produced into each, then ROUNDS rounds in which each build in turn has a
# healthy push-consumer run and a storm run (every 10th message's first
# delivery fails), so that the machine's drift falls on both. Each line
# gives the build (A or B), the run, its healthy messages per second, the
# consumer's and the broker's CPU seconds and, for a storm run, its drop
# against the healthy run just before.
#
# Usage: scripts/stormab.sh ROUNDS BIN_A BIN_B
set -u
. "$(dirname "$0")/lib.sh"
rounds=$1; A=$2; B=$3
work=$(mktemp -d /tmp/gantry-storm.XXXXXX)
start() { # bin idx
  local p=$((20000 + $2 * 1000))
  "$1" dev --dir "$work/data$2" --namesrv-listen 127.0.0.1:$((p+877)) --namesrv-remoting-listen 127.0.0.1:$((p+876)) \
    --broker-listen 127.0.0.1:$((p+81)) --broker-remoting-listen 127.0.0.1:$((p+921)) --http-listen 127.0.0.1:$((p+557)) >"$work/dev$2.log" 2>&1 &
  echo $!
}
devA=$(start $A 8); devB=$(start $B 9)
trap 'kill -INT $devA $devB; wait; rm -rf $work' EXIT
sleep 2
$A bench produce -n 127.0.0.1:28877 -t StormTest --count 1000000 | tail -1
$B bench produce -n 127.0.0.1:29877 -t StormTest --count 1000000 | tail -1
sleep 5
for i in $(seq $rounds); do
  for x in A B; do
    if [ $x = A ]; then bin=$A; dev=$devA; ns=127.0.0.1:28877; else bin=$B; dev=$devB; ns=127.0.0.1:29877; fi
    for mode in healthy storm; do
      extra=(); [ $mode = storm ] && extra=(--fail-every 10)
      push_run $dev "$bin" $ns 1000000 "g-$mode-$i-$RANDOM" "${extra[@]}"
      if [ $mode = healthy ]; then h=$rate; d=""; else d="drop $(echo "scale=1; 100 * ($h - $rate) / $h" | bc) %"; fi
      printf '%s %-7s %7s msgs/s  consumer %ss  broker %.2fs %s\n' $x $mode "$rate" "$ccpu" "$bcpu" "$d"
      sleep 13
    done
  done
done
