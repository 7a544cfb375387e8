#!/usr/bin/env bash
# bench/run1k.sh is one figure alone: `pipec run` of the 1,000-task
# DAG from bench/gendag against `make -j2` on the same DAG, side
# by side in one run (alternating, so both see the same machine load), best
# of RUNS wall times each, and the ratio against the target of 1.25×. Each
# pipec run gets a fresh folder and state (nothing is resumed). A benchmark,
# never part of the unit tests.
#
#	bench/run1k.sh              RUNS=9 bench/run1k.sh
#	PIPEC=/path/to/pipec bench/run1k.sh   measure another build
#
# It also prints the CPU time (user+system, children included) of each side,
# the steadier figure on a shared machine. For a profile of the runtime on a
# DAG of the same shape: go test -run '^$' -bench BenchmarkRunDAG -cpuprofile
# cpu.prof ./runtime/ && go tool pprof -top cpu.prof
set -uo pipefail
main() {
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && go run ./bench/gendag -n 1000 -seed 42 -out "$work/dag") || exit 2
if [[ -n ${PIPEC:-} ]]; then
	cp "$PIPEC" "$work/pipec" || exit 2 # another build, e.g. an older commit's, for comparison
else
	(cd "$root" && go build -o "$work/pipec" ./cmd/pipec) || exit 2
fi
best_p="" best_m="" cpu_p="" cpu_m=""
TIMEFORMAT='%R %U %S'
# timed CMD... sets W (wall seconds) and C (user+system seconds) of CMD.
timed() {
	local out
	out=$( { time "$@" >/dev/null 2>&1; } 2>&1 ) || return 1
	W=$(awk '{ print $1 }' <<<"$out") C=$(awk '{ printf "%.3f", $2 + $3 }' <<<"$out")
}
run_pipec() { cd "$1" && "$work/pipec" run pipeline.hcl --interval 2024-01-01 --parallel 2; }
minf() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 < a + 0) print b; else print a }'; }
for ((i = 0; i <= runs; i++)); do
	mkdir -p "$work/r$i" && cp "$work/dag/pipeline.hcl" "$work/r$i/"
	timed run_pipec "$work/r$i" || { echo "pipec run failed"; exit 1; }
	p=$W pc=$C
	timed make -s -j2 -f "$work/dag/Makefile" || exit 1
	m=$W mc=$C
	((i == 0)) && continue # warm-up
	printf 'run %d: pipec %ss (cpu %ss)  make -j2 %ss (cpu %ss)\n' "$i" "$p" "$pc" "$m" "$mc"
	best_p=$(minf "$best_p" "$p") best_m=$(minf "$best_m" "$m")
	cpu_p=$(minf "$cpu_p" "$pc") cpu_m=$(minf "$cpu_m" "$mc")
done
ratio=$(awk -v a="$best_p" -v b="$best_m" 'BEGIN { printf "%.2f", a / b }')
verdict=$(awk -v r="$ratio" 'BEGIN { print (r <= 1.25 ? "PASS" : "FAIL") }')
printf '%s run 1k vs make -j2: pipec %ss, make %ss, %s× (target <= 1.25×, best of %d)\n' "$verdict" "$best_p" "$best_m" "$ratio" "$runs"
printf '     cpu: pipec %ss, make %ss, %s×\n' "$cpu_p" "$cpu_m" "$(awk -v a="$cpu_p" -v b="$cpu_m" 'BEGIN { printf "%.2f", a / b }')"
[[ $verdict == PASS ]]
}
main "$@"
