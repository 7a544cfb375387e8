#!/usr/bin/env bash
# bench/lint16.sh measures the rows of issue 16 that are not the runtime's,
# each figure beside its reference, the commands run alternately in one run
# so they see the same machine load:
#
#	lint 10k HCL      pipec lint vs actionlint on the same DAG   ratio <= 0.5
#	lint 10k CUE      pipec lint vs cue vet on the same DAG      ratio <= 0.5
#	lint orders       pipec-lint of examples/orders (a pre-commit run: the
#	                  hook runs the lint-only binary; pipec lint beside it)
#	                  vs actionlint of a small workflow          ratio <= 1.5
#	--version         pipec --version vs actionlint --version    information
#	lsp 10k CUE       change -> diagnostics through the protocol
#	                  (BenchmarkChangeToDiagnostics in lsp/)     <= 150 ms
#
# Wall times are the best of RUNS (at least 30 for the millisecond rows),
# CPU times (user+system, from the shell's `times`) the smallest: on a shared
# machine CPU time is the steadier figure. A benchmark, never part of the
# unit tests.
#
#	bench/lint16.sh
#	RUNS=15 BEFORE=/tmp/pipec-old bench/lint16.sh   an older build in every row, alternating
#	PIPEC=/tmp/pipec-new bench/lint16.sh            another build instead of this tree's
#	                                                (pipec-lint beside it, or PIPEC_LINT=)
#	LSP=0 bench/lint16.sh                           leave out the language server row
#
# The DAGs come from the shared benchmark generator: bench/gendag when this
# tree has it, else the one bench/run.sh uses (PIPEC_SHARED). Exit status 0
# when no row FAILed.
set -uo pipefail

main() {
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
runs=${RUNS:-9}
work=${PIPEC_BENCH_DIR:-${TMPDIR:-/tmp}/pipec-bench}
mkdir -p "$work/bin" "$work/lint16"
failed=0
say() { printf '%s\n' "$*"; }

# --- inputs and tools ---------------------------------------------------------
# bench/gendag is a package of this module: it runs from the tree's root.
gendir=$work
if [[ -d bench/gendag ]]; then
	gen=(go run ./bench/gendag) gendir=$root
else
	shared=${PIPEC_SHARED:-$(dirname "$root")/shared}
	[[ -f $shared/bench/gendag.go ]] || { say "bench: no DAG generator (bench/gendag, or set PIPEC_SHARED)"; exit 2; }
	gen=(go run "$shared/bench/gendag.go")
fi
d10=$work/lint16/10000
if [[ ! -s $d10/pipeline.cue ]]; then
	say "bench: generating 10,000 tasks into $d10"
	(cd "$gendir" && "${gen[@]}" -n 10000 -seed 42 -out "$d10") || exit 2
fi
small=$root/bench/testdata/small-workflow.yml

if [[ -n ${PIPEC:-} ]]; then
	pipec=$PIPEC
else
	pipec=$work/bin/pipec
	go build -o "$pipec" ./cmd/pipec || exit 2
fi
# pipec-lint: PIPEC_LINT, else the one beside PIPEC, else this tree's.
if [[ -n ${PIPEC_LINT:-} ]]; then
	pipec_lint=$PIPEC_LINT
elif [[ -n ${PIPEC:-} && -x $(dirname "$PIPEC")/pipec-lint ]]; then
	pipec_lint=$(dirname "$PIPEC")/pipec-lint
else
	pipec_lint=$work/bin/pipec-lint
	go build -o "$pipec_lint" ./cmd/pipec-lint || exit 2
fi
before=${BEFORE:-}
install_tool() { # NAME VERSION_REGEX MODULE@VERSION
	if [[ ! $("$work/bin/$1" --version 2>/dev/null; "$work/bin/$1" version 2>/dev/null) =~ $2 ]]; then
		say "bench: installing $3"
		GOBIN=$work/bin go install "$3" || exit 2
	fi
}
install_tool actionlint 'v?1\.7\.12' github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
install_tool cue 'v0\.17\.1' cuelang.org/go/cmd/cue@v0.17.1
actionlint=$work/bin/actionlint cue=$work/bin/cue

say "pipec issue-16 lint benchmark, best of $runs, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo '+dirty')${before:+, before: $before}"
say ""

# --- timing -------------------------------------------------------------------
# wall CMD... sets WALL and CPU (seconds) of one run; it runs in this shell,
# nothing forks around the command.
wall() {
	local t0 t1
	times >"$work/lint16/times0"
	t0=$EPOCHREALTIME
	"$@" >/dev/null 2>&1
	t1=$EPOCHREALTIME
	times >"$work/lint16/times1"
	WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
	CPU=$(awk 'function sec(s) { split(s, p, "m"); sub(/s$/, "", p[2]); return p[1] * 60 + p[2] }
		FNR == 2 { t = sec($1) + sec($2); if (NR == FNR) a = t; else b = t }
		END { printf "%.6f", b - a }' "$work/lint16/times0" "$work/lint16/times1")
}
minf() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 < a + 0) print b; else print a }'; }
ms() { awk -v s="$1" 'BEGIN { printf "%.1f ms", s * 1000 }'; }

# row NAME TARGET N -- LABEL CMD... [;; LABEL CMD...]...: the commands run
# alternately N times after a warm-up; the first is pipec, the last the
# reference; the verdict is the first's best wall time over the last's.
row() {
	local name=$1 target=$2 n=$3 i j
	shift 4
	local -a labels=() cmds=()
	local cur="" lab=""
	for a in "$@"; do
		if [[ $a == ";;" ]]; then cmds+=("$cur") cur="" lab=""; continue; fi
		if [[ -z $lab ]]; then lab=$a labels+=("$a"); continue; fi
		cur+="$(printf '%q ' "$a")"
	done
	cmds+=("$cur")
	local -a bw=() bc=()
	for j in "${!cmds[@]}"; do eval "${cmds[$j]}" >/dev/null 2>&1; done
	for ((i = 0; i < n; i++)); do
		for j in "${!cmds[@]}"; do
			eval "wall ${cmds[$j]}"
			bw[j]=$(minf "${bw[j]:-}" "$WALL") bc[j]=$(minf "${bc[j]:-}" "$CPU")
		done
	done
	local last=$((${#cmds[@]} - 1)) ratio verdict
	say "$name:"
	for j in "${!cmds[@]}"; do
		ratio=$(awk -v a="${bw[j]}" -v b="${bw[last]}" 'BEGIN { printf "%.2f", a / b }')
		printf '    %-22s %10s wall %10s cpu   %sx the reference\n' "${labels[j]}" "$(ms "${bw[j]}")" "$(ms "${bc[j]}")" "$ratio"
	done
	ratio=$(awk -v a="${bw[0]}" -v b="${bw[last]}" 'BEGIN { printf "%.2f", a / b }')
	if [[ $target == - ]]; then
		verdict=INFO
	else
		verdict=$(awk -v r="$ratio" -v m="$target" 'BEGIN { print (r <= m) ? "PASS" : "FAIL" }')
		[[ $verdict == FAIL ]] && failed=1
	fi
	if [[ $target == - ]]; then
		say "    $verdict ${labels[0]}: ratio $ratio (no target)"
	else
		say "    $verdict ${labels[0]}: ratio $ratio (target <= $target)"
	fi
}

# with_before LABEL CMD...: the command for pipec, preceded by the same
# command for the BEFORE build when there is one.
rowcmds=()
with_before() {
	rowcmds=("$1" "${@:2}")
	if [[ -n $before ]]; then
		local -a b=("${@:2}")
		b[0]=$before
		rowcmds+=(";;" "before" "${b[@]}")
	fi
}

short=$((runs < 30 ? 30 : runs))

with_before pipec "$pipec" lint "$d10/pipeline.hcl"
row "lint 10k HCL vs actionlint" 0.5 "$runs" -- "${rowcmds[@]}" ";;" actionlint "$actionlint" -no-color -shellcheck= -pyflakes= "$d10/workflow.yml"
with_before pipec "$pipec" lint "$d10/pipeline.cue"
row "lint 10k CUE vs cue vet" 0.5 "$runs" -- "${rowcmds[@]}" ";;" "cue vet" "$cue" vet "$d10/pipeline.cue"
# The pre-commit hook runs pipec-lint (the lint-only binary); pipec lint is
# shown beside it.
with_before "pipec lint" "$pipec" lint examples/orders/pipeline.hcl
row "lint orders vs actionlint small (pre-commit: pipec-lint)" 1.5 "$short" -- pipec-lint "$pipec_lint" examples/orders/pipeline.hcl ";;" \
	"${rowcmds[@]}" ";;" actionlint "$actionlint" -no-color -shellcheck= -pyflakes= "$small"
with_before pipec "$pipec" --version
row "--version" - "$short" -- "${rowcmds[@]}" ";;" actionlint "$actionlint" --version

# --- language server ------------------------------------------------------------
# Two changes: a comment line typed at the end and deleted (no chunk of the
# CUE spec changes), and a new timeout in the middle task (its chunk does).
if [[ ${LSP:-1} == 1 ]]; then
	go test -c -o "$work/lint16/lsp.test" ./lsp/ || exit 2
	say "lsp 10k CUE, change -> diagnostics (BenchmarkChangeToDiagnostics, 20 changes a round, best of 3 rounds):"
	declare -A best bestcpu
	for ((i = 0; i < 3; i++)); do
		for b in pipec ${before:+before}; do
			bin=$pipec
			[[ $b == before ]] && bin=$before
			while read -r name ns cpu; do
				[[ -n $ns ]] || continue
				best[$b $name]=$(minf "${best[$b $name]:-}" "$(awk -v n="$ns" 'BEGIN { print n / 1e9 }')")
				bestcpu[$b $name]=$(minf "${bestcpu[$b $name]:-}" "$cpu")
			done < <(cd lsp && PIPEC_BENCH_BIN=$bin "$work/lint16/lsp.test" -test.run '^$' \
				-test.bench 'ChangeToDiagnostics/gendag10k.cue' -test.benchtime 20x 2>&1 |
				awk '/^Benchmark/ { n = $1; sub(/^.*gendag10k\./, "", n); sub(/-[0-9]+$/, "", n)
					for (i = 1; i <= NF; i++) { if ($i == "ns/op") ns = $(i-1); if ($i == "server-cpu-ms/op") c = $(i-1) }
					print n, ns, c }')
		done
	done
	for name in cue cue-task-edit; do
		for b in pipec ${before:+before}; do
			if [[ -n ${best[$b $name]:-} ]]; then
				printf '    %-8s %-16s %10s a change, server cpu %s ms\n' "$b" "$name" "$(ms "${best[$b $name]}")" "${bestcpu[$b $name]}"
			else
				say "    $b $name: the benchmark did not run"
			fi
		done
		if [[ -n ${best[pipec $name]:-} ]]; then
			verdict=$(awk -v t="${best[pipec $name]}" 'BEGIN { print (t <= 0.150) ? "PASS" : "FAIL" }')
			[[ $verdict == FAIL ]] && failed=1
			say "    $verdict pipec $name: $(ms "${best[pipec $name]}") (target <= 150 ms)"
		fi
	done
fi
exit $failed
}

main "$@"
