#!/bin/sh
# clean: drops duplicate orders and rows whose amount is not a number, reading the
# accepted raw_orders of this interval and writing orders_clean.
set -eu
in="${PIPEC_INPUT_raw_orders:?run me with pipec run}/raw_orders.csv"
out="${PIPEC_OUTPUT_orders_clean:?run me with pipec run}/orders_clean.csv"
if ! head -n 1 "$in" | grep -q '^order_id,customer,amount,ordered_at$'; then
  echo "clean: unexpected header in raw_orders: $(head -n 1 "$in")" >&2
  exit 65 # the schema error class: deterministic, never retried
fi
awk -F, 'NR == 1 { print; next }
  $3 ~ /^[0-9]+(\.[0-9]+)?$/ && !seen[$1]++ { print }' "$in" > "$out"
echo "cleaned $(($(wc -l < "$out") - 1)) rows"
