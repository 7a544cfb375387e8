#!/bin/sh
# extract: writes the day's raw orders (some duplicated, some with bad amounts)
# as CSV into the attempt's staging directory. Deterministic per interval, so a
# retried attempt produces the same bytes.
set -eu
out="${PIPEC_OUTPUT_raw_orders:?run me with pipec run}"
day=$(printf '%s' "${PIPEC_INTERVAL_START:?}" | cut -c1-10)
seed=$(printf '%s' "$day" | tr -d '-')
# Renew the lease the heartbeat block asks for, if the runtime gave us a file to touch.
[ -n "${PIPEC_HEARTBEAT:-}" ] && touch "$PIPEC_HEARTBEAT"
awk -v day="$day" -v seed="$seed" 'BEGIN {
  srand(seed % 100000)
  print "order_id,customer,amount,ordered_at"
  n = 20 + int(rand() * 10)
  for (i = 1; i <= n; i++) {
    id = sprintf("%s-%04d", seed, i)
    amount = sprintf("%.2f", rand() * 200)
    if (i % 7 == 0) amount = "n/a"
    line = id ",c" int(rand() * 50) "," amount "," day "T" sprintf("%02d", i % 24) ":00:00Z"
    print line
    if (i % 5 == 0) print line   # the source system sends some orders twice
  }
}' > "$out/raw_orders.csv"
echo "extracted $(($(wc -l < "$out/raw_orders.csv") - 1)) rows for $day"
