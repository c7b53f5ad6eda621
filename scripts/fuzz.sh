#!/usr/bin/env bash
# Runs every Fuzz target of the module for a short time each (default 5s).
# Usage: scripts/fuzz.sh [fuzztime]
#
# Go 1.26's fuzz coordinator can fail a run with a bare "context deadline
# exceeded" when a duration-based -fuzztime ends while a worker is busy
# (go.dev/issue/75804, fixed in Go 1.27). Such a failure writes no failing
# input: it is run again, up to twice (one CI run hit it in two targets
# of 26); a failure that wrote an input under
# testdata/fuzz/<target>/ always fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-5s}
status=0
log=/tmp/fuzz-$$.log
count() { if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi; }
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for name in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    corpus="$pkg/testdata/fuzz/$name"
    for attempt in 1 2 3; do
      echo "fuzz: $pkg $name ($fuzztime)"
      before=$(count "$corpus")
      if go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg" >"$log" 2>&1; then
        tail -n 1 "$log"
        break
      fi
      after=$(count "$corpus")
      cat "$log"
      if [ "$after" = "$before" ] && grep -q 'context deadline exceeded' "$log" && [ "$attempt" != 3 ]; then
        echo "fuzz: $pkg $name: the fuzz coordinator's deadline race (go.dev/issue/75804), no failing input; running it again"
        continue
      fi
      echo "fuzz: $pkg $name FAILED (a failing input is saved under $corpus/)"
      status=1
      break
    done
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort)
rm -f "$log"
exit $status
