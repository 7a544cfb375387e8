#!/usr/bin/env bash
# bench/backfill.sh is a backfill's figure: `pipec backfill` of INTERVALS
# daily intervals of the benchmark DAG (bench/gendag, TASKS tasks; its last
# task's output published to a directory sink every interval), one run at
# a time, against make -j2 run as many times on the same DAG. Both sides
# alternate, ROUNDS times, best of each. The backfill goes a quarter of the
# intervals at a time in one state, and the first and the last quarter's
# times are printed: a run's own cost must not grow with the intervals the
# sink and the state already hold. A benchmark, never part of the unit
# tests.
#
#	bench/backfill.sh                       TASKS=20 INTERVALS=365 ROUNDS=3
#	PIPEC=/path/to/pipec bench/backfill.sh  measure another build
set -uo pipefail
main() {
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/workfs.sh"
tasks=${TASKS:-20} intervals=${INTERVALS:-365} rounds=${ROUNDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && go run ./bench/gendag -n "$tasks" -seed 42 -out "$work/dag") || exit 2
if [[ -n ${PIPEC:-} ]]; then
	cp "$PIPEC" "$work/pipec" || exit 2
else
	(cd "$root" && go build -o "$work/pipec" ./cmd/pipec) || exit 2
fi
TIMEFORMAT='%R %U %S'
timed() {
	local out
	out=$( { time "$@" >/dev/null 2>&1; } 2>&1 ) || return 1
	W=$(awk '{ print $1 }' <<<"$out") C=$(awk '{ printf "%.3f", $2 + $3 }' <<<"$out")
}
day() { date -u -d "2024-01-01 + $1 days" +%F; }
# backfill DIR FROM TO runs the intervals FROM..TO (day numbers, both
# included) in DIR's state.
backfill() { cd "$1" && "$work/pipec" backfill pipeline.hcl --from "$(day "$2")" --to "$(day "$3")" --parallel 2; }
makes() { for ((k = 0; k < intervals; k++)); do make -s -j2 -f "$work/dag/Makefile" || return 1; done; }
minf() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 < a + 0) print b; else print a }'; }
best_p="" best_m="" cpu_p="" cpu_m="" first="" last=""
for ((i = 1; i <= rounds; i++)); do
	mkdir -p "$work/r$i" && cp "$work/dag/pipeline.hcl" "$work/r$i/"
	# Four backfills of a quarter each, one after the other in one state:
	# the last quarter's runs start with three quarters already held.
	p=0 pc=0 f="" l=""
	for ((q = 0; q < 4; q++)); do
		timed backfill "$work/r$i" $((q * intervals / 4)) $(((q + 1) * intervals / 4 - 1)) || { echo "pipec backfill failed"; exit 1; }
		p=$(awk -v a="$p" -v b="$W" 'BEGIN { printf "%.3f", a + b }') pc=$(awk -v a="$pc" -v b="$C" 'BEGIN { printf "%.3f", a + b }')
		((q == 0)) && f=$W
		l=$W
	done
	n=$(cd "$work/r$i" && "$work/pipec" status pipeline.hcl | grep -c '^bench/.* succeeded$')
	((n == intervals)) || { echo "backfill.sh: $n of $intervals runs succeeded"; exit 1; }
	timed makes || exit 1
	m=$W mc=$C
	printf 'round %d: pipec %ss (cpu %ss; first quarter %ss, last %ss)  make -j2 ×%d %ss (cpu %ss)\n' \
		"$i" "$p" "$pc" "$f" "$l" "$intervals" "$m" "$mc"
	best_p=$(minf "$best_p" "$p") best_m=$(minf "$best_m" "$m")
	cpu_p=$(minf "$cpu_p" "$pc") cpu_m=$(minf "$cpu_m" "$mc")
	first=$(minf "$first" "$f") last=$(minf "$last" "$l")
done
printf 'backfill of %d intervals × %d tasks: pipec %ss, make -j2 %ss, %s× (best of %d)\n' "$intervals" "$tasks" \
	"$best_p" "$best_m" "$(awk -v a="$best_p" -v b="$best_m" 'BEGIN { printf "%.2f", a / b }')" "$rounds"
printf '     cpu: pipec %ss, make %ss, %s×\n' "$cpu_p" "$cpu_m" "$(awk -v a="$cpu_p" -v b="$cpu_m" 'BEGIN { printf "%.2f", a / b }')"
printf '     pipec, first quarter of the intervals %ss, last quarter %ss, %s×\n' "$first" "$last" \
	"$(awk -v a="$last" -v b="$first" 'BEGIN { printf "%.2f", a / b }')"
workfs "$work"
}
main "$@"
