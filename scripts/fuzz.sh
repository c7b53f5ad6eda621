#!/usr/bin/env bash
# Runs every Fuzz target of the module for a short time each (default 5s).
# Usage: scripts/fuzz.sh [fuzztime]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-5s}
status=0
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for name in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    echo "fuzz: $pkg $name ($fuzztime)"
    if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg" >/tmp/fuzz-$$.log 2>&1; then
      cat /tmp/fuzz-$$.log
      echo "fuzz: $pkg $name FAILED (a failing input is saved under $pkg/testdata/fuzz/$name/)"
      status=1
    else
      tail -n 1 /tmp/fuzz-$$.log
    fi
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort)
rm -f /tmp/fuzz-$$.log
exit $status
