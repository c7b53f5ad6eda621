# Shared by the benchmark scripts (source it).

# cpu PID prints the CPU seconds (user + system) process PID has used.
cpu() { awk '{printf "%.2f", ($14+$15)/100}' "/proc/$1/stat"; }

# push_run DEV BIN NS COUNT GROUP [ARGS...] runs one push-consumer pass of
# `BIN bench consume` over COUNT messages of topic StormTest through
# nameserver NS, as consumer group GROUP (ARGS are passed on), and sets
# rate (messages per second), secs (its time), ccpu (the consumer's CPU
# seconds) and bcpu (the CPU seconds broker process DEV spent meanwhile).
push_run() {
  local dev=$1 bin=$2 ns=$3 count=$4 group=$5 b0 b1 out
  shift 5
  b0=$(cpu "$dev")
  out=$( { /usr/bin/time -f "TIME %U %S" "$bin" bench consume -n "$ns" -t StormTest --count "$count" --push -g "$group" "$@" 2>&1; } 2>&1 )
  b1=$(cpu "$dev")
  rate=$(echo "$out" | sed -n 's/.* msgs in .* = \([0-9]*\) msgs\/s.*/\1/p')
  secs=$(echo "$out" | sed -n 's/.* msgs in \([0-9.]*s\) = .*/\1/p')
  ccpu=$(echo "$out" | awk '/^TIME/ {printf "%.2f", $2+$3}')
  bcpu=$(echo "$b1 - $b0" | bc)
}

# dev_start BIN starts a fresh `BIN dev` on the default ports with its
# store in a new temporary directory, waits for it to be ready, and sets
# dev (its PID) and devdir (the directory).
dev_start() {
  devdir=$(mktemp -d /tmp/gantry-ab.XXXXXX)
  "$1" dev --dir "$devdir/data" >"$devdir/dev.log" 2>&1 &
  dev=$!
  sleep 1.5
}

# dev_stop stops the `gantry dev` of dev_start (Ctrl-C) and removes its
# directory.
dev_stop() {
  kill -INT "$dev"
  wait "$dev"
  rm -rf "$devdir"
}
