#!/usr/bin/env bash
# precommit-test.sh checks .pre-commit-hooks.yaml (which runs pipec-lint, the
# lint-only binary, handing .cue files to pipec) with the real pre-commit tool:
# in a throwaway git repository whose .pre-commit-config.yaml points at this
# repository's HEAD commit (pre-commit clones it, so only committed files
# count), a commit of a good spec must pass the hook, a commit of a spec with
# an error finding must be refused with that finding, a commit with no
# spec must skip the hook, and Terraform, Terragrunt and Packer .hcl files
# (valid or not) and paths ignored by .pipec.yaml must never block a commit,
# while a pipeline spec that does not even parse still does. Exits non-zero on
# any other outcome.
#
# pre-commit itself is installed from Debian (apt-get install pre-commit) when
# missing. The Go module cache is shared with the caller's, so pre-commit's
# `go install ./...` does not download every module again.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "precommit-test: FAIL: $*" >&2; exit 1; }

if ! command -v pre-commit >/dev/null; then
	echo "precommit-test: installing pre-commit (Debian package)" >&2
	if [ "$(id -u)" = 0 ]; then
		apt-get update -qq && apt-get install -y -qq pre-commit >/dev/null
	else
		sudo apt-get update -qq && sudo apt-get install -y -qq pre-commit >/dev/null
	fi
fi
echo "precommit-test: $(pre-commit --version)"

rev=$(git -C "$root" rev-parse HEAD)
git -C "$root" cat-file -e "$rev:.pre-commit-hooks.yaml" 2>/dev/null ||
	fail ".pre-commit-hooks.yaml is not committed at HEAD ($rev)"
good_spec=examples/orders/pipeline.hcl
good_cue=examples/orders/pipeline.cue
bad_spec=examples/broken/cycle.hcl
bad_rule=cycle
bad_cue=examples/broken/schema.cue
bad_cue_rule=schema
syntax_spec=examples/broken/syntax.hcl

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
export PRE_COMMIT_HOME=$tmp/pre-commit-home
export GOMODCACHE=${GOMODCACHE:-$(go env GOMODCACHE)}
export GOFLAGS=${GOFLAGS:-}
repo=$tmp/repo
mkdir -p "$repo"
cd "$repo"
git init -q -b main
git config user.email precommit-test@example.invalid
git config user.name precommit-test
git config commit.gpgsign false
cat >.pre-commit-config.yaml <<YAML
repos:
  - repo: $root
    rev: $rev
    hooks:
      - id: pipec-lint
YAML
git add .pre-commit-config.yaml
git commit -q --no-verify -m "config"
pre-commit install >/dev/null

# 1. A commit with no spec skips the hook.
echo "notes" >README.md
git add README.md
git commit -m "readme" >"$tmp/out0" 2>&1 || { cat "$tmp/out0"; fail "a commit with no spec was refused"; }
grep -q "pipec lint.*Skipped" "$tmp/out0" || { cat "$tmp/out0"; fail "the hook did not report Skipped for a commit with no spec"; }
echo "precommit-test: ok: commit without specs skips the hook"

# 2. Good specs (the orders example at HEAD, HCL and CUE) pass.
mkdir -p pipelines
git -C "$root" show "$rev:$good_spec" >pipelines/orders.hcl
git -C "$root" show "$rev:$good_cue" >pipelines/orders.cue
git add pipelines/orders.hcl pipelines/orders.cue
if ! git commit -m "good spec" >"$tmp/out1" 2>&1; then
	cat "$tmp/out1"
	fail "the hook refused the good spec $good_spec"
fi
grep -q "pipec lint.*Passed" "$tmp/out1" || { cat "$tmp/out1"; fail "the hook did not report Passed for the good spec"; }
echo "precommit-test: ok: good specs (HCL and CUE) pass"
# The hook's entry is pipec-lint, which hands .cue files to the pipec that
# go install put beside it: both must be there.
for bin in pipec-lint pipec; do
	find "$PRE_COMMIT_HOME" -type f -name "$bin" -perm -u+x | grep -q . ||
		fail "pre-commit's go install did not build $bin"
done
echo "precommit-test: ok: pre-commit built pipec-lint and pipec"

# 3. Other HCL never blocks: Terraform (one with a syntax error), Terragrunt
# and Packer files pass, found by parsing (no pipeline block), not by name.
mkdir -p infra/live images
cat >infra/main.hcl <<'HCL'
resource "aws_s3_bucket" "pipeline_data" {
  bucket = "pipeline-data"
}
HCL
cat >infra/broken.hcl <<'HCL'
variable "region" {
  default = [
HCL
cat >infra/live/terragrunt.hcl <<'HCL'
include "root" {
  path = find_in_parent_folders()
}
inputs = {
  pipeline = "orders"
}
HCL
cat >images/app.pkr.hcl <<'HCL'
source "amazon-ebs" "pipeline" {
  ami_name = "pipeline"
}
build {
  sources = ["source.amazon-ebs.pipeline"]
}
HCL
git add infra images
if ! git commit -m "terraform, terragrunt, packer" >"$tmp/out3" 2>&1; then
	cat "$tmp/out3"
	fail "the hook refused Terraform/Terragrunt/Packer files"
fi
grep -q "pipec lint.*Passed" "$tmp/out3" || { cat "$tmp/out3"; fail "the hook did not run (Passed) on the other HCL files"; }
echo "precommit-test: ok: Terraform, Terragrunt and Packer files (one broken) pass"

# 4. Paths ignored by .pipec.yaml never block, even a broken pipeline spec.
mkdir -p legacy
printf 'ignore:\n  - legacy/\n' >.pipec.yaml
git -C "$root" show "$rev:$bad_spec" >legacy/old.hcl
git add .pipec.yaml legacy
if ! git commit -m "ignored legacy spec" >"$tmp/out4" 2>&1; then
	cat "$tmp/out4"
	fail "the hook refused a spec under a path .pipec.yaml ignores"
fi
echo "precommit-test: ok: paths ignored by .pipec.yaml pass"

# 5. Specs with error findings are refused, and the findings are shown; a
# pipeline spec that does not parse is refused too (it is still a spec).
git -C "$root" show "$rev:$bad_spec" >pipelines/bad.hcl
git -C "$root" show "$rev:$bad_cue" >pipelines/bad.cue
git -C "$root" show "$rev:$syntax_spec" >pipelines/syntax.hcl
git add pipelines/bad.hcl pipelines/bad.cue pipelines/syntax.hcl
if git commit -m "bad spec" >"$tmp/out2" 2>&1; then
	cat "$tmp/out2"
	fail "the hook accepted $bad_spec"
fi
grep -q "pipec lint.*Failed" "$tmp/out2" || { cat "$tmp/out2"; fail "the hook did not report Failed for the bad spec"; }
grep -q "pipelines/bad.hcl:[0-9]*:[0-9]*: error: .*\[$bad_rule\]" "$tmp/out2" ||
	{ cat "$tmp/out2"; fail "the refusal does not show the [$bad_rule] finding in pipelines/bad.hcl"; }
grep -q "pipelines/bad.cue:[0-9]*:[0-9]*: error: .*\[$bad_cue_rule\]" "$tmp/out2" ||
	{ cat "$tmp/out2"; fail "the refusal does not show the [$bad_cue_rule] finding in pipelines/bad.cue"; }
grep -q "pipelines/syntax.hcl:[0-9]*:[0-9]*: error: .*\[syntax\]" "$tmp/out2" ||
	{ cat "$tmp/out2"; fail "the refusal does not show the [syntax] finding in pipelines/syntax.hcl"; }
grep -q "pipelines/orders\." "$tmp/out2" && { cat "$tmp/out2"; fail "the hook linted an unchanged file"; }
[ "$(git rev-list --count HEAD)" = 5 ] || fail "the refused commit was recorded"
echo "precommit-test: ok: bad specs refused:"
grep -E "\[($bad_rule|$bad_cue_rule|syntax)\]" "$tmp/out2" | sed 's/^/    /'
echo "precommit-test: PASS (rev $rev)"
