#!/bin/sh
# events: one day of purchase events (customer,amount), deterministic per day.
set -eu
out="${PIPEC_OUTPUT_day_events:?run me with pipec run}"
seed=$(printf '%s' "${PIPEC_INTERVAL_START:?}" | cut -c1-10 | tr -d '-')
awk -v seed="$seed" 'BEGIN { srand(seed % 100000); print "customer,amount"
  for (i = 0; i < 15; i++) printf "c%d,%d\n", int(rand() * 5), 1 + int(rand() * 100) }' > "$out/day_events.csv"
