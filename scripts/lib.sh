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
# store in a new temporary directory, waits until it says it is ready (at
# most 10 s; it returns 1 if the process ended or never said so), and sets
# dev (its PID) and devdir (the directory). DEVFLAGS (env) are more flags
# for `gantry dev`, such as --flush SYNC_FLUSH.
dev_start() {
  devdir=$(mktemp -d /tmp/gantry-ab.XXXXXX)
  # shellcheck disable=SC2086 # DEVFLAGS is a list of flags
  "$1" dev --dir "$devdir/data" ${DEVFLAGS:-} >"$devdir/dev.log" 2>&1 &
  dev=$!
  for _ in $(seq 100); do
    grep -q 'ready in' "$devdir/dev.log" && return 0
    kill -0 "$dev" 2>/dev/null || break
    sleep 0.1
  done
  echo "dev_start: $1 dev did not get ready; its log:" >&2
  cat "$devdir/dev.log" >&2
  return 1
}

# dev_stop stops the `gantry dev` of dev_start (Ctrl-C) and removes its
# directory.
dev_stop() {
  kill -INT "$dev" 2>/dev/null
  wait "$dev"
  rm -rf "$devdir"
}

# ab_rounds PAIRS BIN... runs the A/B scripts' rounds: PAIRS times, each
# BIN in turn (builds alternate, so that the machine's drift falls on all
# of them) gets a fresh `gantry dev` (dev_start), the script's round
# function is called with BIN while it runs, and it is stopped (dev_stop),
# with a pause of PAUSE seconds (default 2) after each.
ab_rounds() {
  local pairs=$1 bin
  shift
  for _ in $(seq "$pairs"); do
    for bin in "$@"; do
      dev_start "$bin" || { dev_stop; return 1; }
      round "$bin"
      dev_stop
      sleep "${PAUSE:-2}"
    done
  done
}
