#!/bin/sh
# totals: yesterday's running totals (when there are any) plus today's events.
set -eu
out="${PIPEC_OUTPUT_running_totals:?run me with pipec run}/running_totals.csv"
prev="${PIPEC_INPUT_running_totals:-}"
{
  [ -n "$prev" ] && [ -f "$prev/running_totals.csv" ] && tail -n +2 "$prev/running_totals.csv"
  tail -n +2 "${PIPEC_INPUT_day_events:?}/day_events.csv"
} | awk -F, 'NF == 2 { t[$1] += $2 } END { print "customer,total"; for (c in t) print c "," t[c] }' |
  { IFS= read -r header; echo "$header"; sort; } > "$out"
