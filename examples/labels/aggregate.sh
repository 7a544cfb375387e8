#!/bin/sh
# aggregate: sums what extract wrote.
set -eu
in="${PIPEC_INPUT_raw:?run me with pipec}/raw.txt"
out="${PIPEC_OUTPUT_totals:?run me with pipec}"
awk '{ s += $1 } END { print s }' "$in" > "$out/total.txt"
echo "aggregated on ${PIPEC_WORKER:-a local run}: $(cat "$out/total.txt")"
