#!/bin/sh
# extract: writes a few numbers, and which worker wrote them.
set -eu
out="${PIPEC_OUTPUT_raw:?run me with pipec}"
printf '%s\n' 3 5 7 > "$out/raw.txt"
echo "extracted on ${PIPEC_WORKER:-a local run}"
