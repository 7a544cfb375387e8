#!/usr/bin/env bash
# sarif-validate.sh [DIR...] checks pipec's SARIF output with Microsoft's
# official validator (SARIF Multitool 5.7.0), which knows rules the JSON schema
# cannot express (rule metadata, region consistency, URI forms).
#
# It lints DIR (default: examples/broken and lint/testdata, specs with
# findings of every rule) with `pipec lint --format sarif`, and also validates
# report/testdata/sarif.golden, the printer's golden file.
# Fails when the validator prints any line with the word error, or a warning.
#
# The validator is installed with npm into $PIPEC_SARIF_CACHE
# (default $HOME/.cache/pipec-sarif), outside the repository.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cache=${PIPEC_SARIF_CACHE:-$HOME/.cache/pipec-sarif}
mt=$cache/node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool

if [ ! -e "$mt" ]; then
	command -v npm >/dev/null || { echo "sarif-validate: npm is needed to install the SARIF Multitool" >&2; exit 2; }
	mkdir -p "$cache"
	echo "sarif-validate: installing @microsoft/sarif-multitool@5.7.0 into $cache" >&2
	npm install --silent --no-audit --no-fund --prefix "$cache" @microsoft/sarif-multitool@5.7.0 >&2
fi
chmod u+x "$mt"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
	# The broken examples (loader and compiler findings) and the linter's test
	# specs (every rule fires somewhere in them).
	dirs=(examples/broken)
	[ -d lint/testdata ] && dirs+=(lint/testdata)
fi

go build -o "$tmp/pipec" ./cmd/pipec
set +e
"$tmp/pipec" lint --format sarif "${dirs[@]}" >"$tmp/lint.sarif" 2>"$tmp/lint.err"
rc=$?
set -e
if ((rc > 1)); then
	echo "sarif-validate: FAIL: pipec lint --format sarif ${dirs[*]} exited $rc: $(head -3 "$tmp/lint.err")" >&2
	exit 1
fi
echo "sarif-validate: SARIF from: pipec lint --format sarif ${dirs[*]} (exit $rc)"
if ! grep -q '"ruleId"' "$tmp/lint.sarif"; then
	echo "sarif-validate: FAIL: the SARIF for ${dirs[*]} holds no result; give a folder with findings" >&2
	exit 1
fi
cp report/testdata/sarif.golden "$tmp/golden.sarif"

status=0
for f in "$tmp/lint.sarif" "$tmp/golden.sarif"; do
	out=$("$mt" validate "$f" 2>&1) || { echo "$out"; echo "sarif-validate: FAIL: the validator failed on $(basename "$f")" >&2; status=1; continue; }
	echo "${out//$tmp\//}"
	if echo "$out" | grep -Eiq '\berror\b|(^|[ :])warning [A-Z]+[0-9]+'; then
		echo "sarif-validate: FAIL: $(basename "$f") has validator errors or warnings" >&2
		status=1
	else
		echo "sarif-validate: ok: $(basename "$f") ($(grep -c '"ruleId"' "$f") results)"
	fi
done
exit $status
