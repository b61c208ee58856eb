#!/usr/bin/env bash
# The GPU kit's command line (scripts/gpu/check.sh), checked without a GPU: --list gives every
# stage in run order, each has its stage_ function and a line in --help, --stages is checked
# (an unknown stage is exit 2 naming it and the known ones; a known one is accepted, whatever
# the order given), the kit's scripts parse, and a stage whose tool is missing (ncu, here) is
# reported as skipped, which is not a failure (exit 0, "skip" in check.json).
# Usage: tests/scripts/gpu_check_args_test.sh SOURCE_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
kit=$src/scripts/gpu/check.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh" # check, passes, failures

all="deps build kernels train layouts demo eval bench ncu"
listed=$(bash "$kit" --list | tr '\n' ' ')
check "--list prints every stage in run order (got '$listed')" [ "$listed" = "$all " ]
help=$(bash "$kit" --help)
for s in $all; do
  check "stage $s has a stage_$s function" grep -q "^stage_$s() {" "$kit"
  check "--help describes stage $s" grep -Eq "^  $s +[^ ]" <<<"$help"
  check "--stages $s is accepted" [ "$(bash "$kit" --stages "$s" --list)" = "$s" ]
done
check "--stages runs in the kit's order" \
  [ "$(bash "$kit" --stages bench,layouts,deps --list | tr '\n' ' ')" = "deps layouts bench " ]
err=$(bash "$kit" --stages layouts,bogus --list 2>&1)
rc=$?
check "an unknown stage is exit 2 (got $rc)" [ "$rc" = 2 ]
check "the error names the stage and the known ones ($err)" \
  grep -q "unknown stage 'bogus'.*deps,build,kernels,train,layouts,demo,eval,bench,ncu" <<<"$err"
bash "$kit" --bogus >/dev/null 2>&1
check "an unknown argument is exit 2" [ $? = 2 ]
for f in check.sh bundle.sh; do
  check "scripts/gpu/$f parses" bash -n "$src/scripts/gpu/$f"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! command -v ncu >/dev/null && [ ! -x /usr/local/cuda/bin/ncu ]; then
  PATH=/usr/bin:/bin bash "$kit" --stages ncu --out "$tmp/out" --work "$tmp/work" >"$tmp/log" 2>&1
  rc=$?
  check "the ncu stage without ncu: exit 0 (got $rc; $(tail -2 "$tmp/log"))" [ "$rc" = 0 ]
  check "check.json says skip" grep -q '"ncu": "skip"' "$tmp/out/check.json"
  check "the summary says why" grep -q "ncu: Nsight Compute not found" "$tmp/out/check.txt"
fi

echo "gpu_check_args: $passes passed, $failures failed"
[ "$failures" = 0 ]
