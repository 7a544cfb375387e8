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
# Beside the best of each side it prints the median and range of each
# run's ratio to the make run right after it: the best walls of the two
# sides can come from different moments of a busy machine, and the range
# says how far one reading of the figure is from the next.
# It also prints the CPU time (user+system, children included) of each side,
# the steadier figure on a shared machine, and that time split in two
# (bench/owncpu): each side's own, and its children's, the same `true`s on
# both sides. Then each side's fixed cost, from a 2-task DAG of the same
# family run after each pair, and the ratio at the margin: what the
# 998 more tasks cost each side (docs/performance.md, "A run's fixed cost").
# For a profile of the runtime on a
# DAG of the same shape: go test -run '^$' -bench BenchmarkRunDAG -cpuprofile
# cpu.prof ./runtime/ && go tool pprof -top cpu.prof
set -uo pipefail
main() {
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/workfs.sh"
runs=${RUNS:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && go run ./bench/gendag -n 1000 -seed 42 -out "$work/dag") || exit 2
(cd "$root" && go run ./bench/gendag -n 2 -seed 42 -out "$work/dag2") || exit 2
if [[ -n ${PIPEC:-} ]]; then
	cp "$PIPEC" "$work/pipec" || exit 2 # another build, e.g. an older commit's, for comparison
else
	(cd "$root" && go build -o "$work/pipec" ./cmd/pipec) || exit 2
fi
(cd "$root" && go build -o "$work/owncpu" ./bench/owncpu) || exit 2
best_p="" best_m="" cpu_p="" cpu_m="" own_p="" own_m="" kids_p="" kids_m=""
pairs=() # each run's wall ratio, pipec over the make that ran right after it
fix_p="" fix_m="" fixc_p="" fixc_m="" # the 2-task DAG's
# timed CMD... sets W (wall seconds), C (user+system seconds), S (CMD's own
# part of C) and K (its children's part) of CMD.
timed() {
	"$work/owncpu" -o "$work/times" "$@" >/dev/null 2>&1 || return 1
	read -r _ W _ C _ S _ K <"$work/times"
}
minf() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 < a + 0) print b; else print a }'; }
for ((i = 0; i <= runs; i++)); do
	mkdir -p "$work/r$i" && cp "$work/dag/pipeline.hcl" "$work/r$i/"
	timed env -C "$work/r$i" "$work/pipec" run pipeline.hcl --interval 2024-01-01 --parallel 2 || { echo "pipec run failed"; exit 1; }
	p=$W pc=$C ps=$S pk=$K
	timed make -s -j2 -f "$work/dag/Makefile" || exit 1
	m=$W mc=$C ms=$S mk=$K
	mkdir -p "$work/f$i" && cp "$work/dag2/pipeline.hcl" "$work/f$i/"
	timed env -C "$work/f$i" "$work/pipec" run pipeline.hcl --interval 2024-01-01 --parallel 2 || { echo "pipec run (2 tasks) failed"; exit 1; }
	fp=$W fpc=$C
	timed make -s -j2 -f "$work/dag2/Makefile" || exit 1
	((i == 0)) && continue # warm-up
	fix_p=$(minf "$fix_p" "$fp") fix_m=$(minf "$fix_m" "$W")
	fixc_p=$(minf "$fixc_p" "$fpc") fixc_m=$(minf "$fixc_m" "$C")
	printf 'run %d: pipec %ss (cpu %ss: own %ss, children %ss)  make -j2 %ss (cpu %ss: own %ss, children %ss)\n' \
		"$i" "$p" "$pc" "$ps" "$pk" "$m" "$mc" "$ms" "$mk"
	pairs+=("$(awk -v a="$p" -v b="$m" 'BEGIN { printf "%.4f", a / b }')")
	best_p=$(minf "$best_p" "$p") best_m=$(minf "$best_m" "$m")
	cpu_p=$(minf "$cpu_p" "$pc") cpu_m=$(minf "$cpu_m" "$mc")
	own_p=$(minf "$own_p" "$ps") own_m=$(minf "$own_m" "$ms")
	kids_p=$(minf "$kids_p" "$pk") kids_m=$(minf "$kids_m" "$mk")
done
ratio=$(awk -v a="$best_p" -v b="$best_m" 'BEGIN { printf "%.2f", a / b }')
verdict=$(awk -v r="$ratio" 'BEGIN { print (r <= 1.25 ? "PASS" : "FAIL") }')
printf '%s run 1k vs make -j2: pipec %ss, make %ss, %s× (target <= 1.25×, best of %d)\n' "$verdict" "$best_p" "$best_m" "$ratio" "$runs"
# The best walls of both sides may come from different moments of the
# machine; the ratio of each run to the make beside it shows how far the
# figure moves from one pair to the next.
printf '     each pair (pipec / the make run beside it): median %s×, %s–%s×\n' $(printf '%s\n' "${pairs[@]}" | sort -n |
	awk '{ r[NR] = $1 } END { m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2; printf "%.2f %.2f %.2f", m, r[1], r[NR] }')
printf '     cpu: pipec %ss, make %ss, %s×\n' "$cpu_p" "$cpu_m" "$(awk -v a="$cpu_p" -v b="$cpu_m" 'BEGIN { printf "%.2f", a / b }')"
printf '     own cpu (children apart, in 10 ms ticks): pipec %ss, make %ss; their children: %ss, %ss\n' "$own_p" "$own_m" "$kids_p" "$kids_m"
margin() { awk -v a="$1" -v fa="$2" -v b="$3" -v fb="$4" 'BEGIN { printf "%.2f", (a - fa) / (b - fb) }'; }
printf '     fixed (a 2-task DAG): pipec %ss, make %ss (cpu %ss, %ss); at the margin (1,000 tasks less 2): wall %s×, cpu %s×\n' \
	"$fix_p" "$fix_m" "$fixc_p" "$fixc_m" "$(margin "$best_p" "$fix_p" "$best_m" "$fix_m")" "$(margin "$cpu_p" "$fixc_p" "$cpu_m" "$fixc_m")"
workfs "$work"
[[ $verdict == PASS ]]
}
main "$@"
