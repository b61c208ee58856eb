#!/usr/bin/env bash
# Every C++ and CUDA source git tracks is as clang-format writes it (.clang-format), so that
# formatting drifts nowhere and a diff holds only what changed. The version matters (each
# major version formats some constructs differently): the check runs with Debian 12's
# clang-format 14 (scripts/packages.txt) and is skipped (77) with another major version.
# Usage: tests/format_test.sh SOURCE_DIR
set -uo pipefail
src=$1
want=14
if ! command -v clang-format >/dev/null; then
  echo "FAIL: clang-format not found (scripts/setup.sh installs it)"
  exit 1
fi
version=$(clang-format --version | sed -nE 's/.*version ([0-9]+)\..*/\1/p')
if [[ $version != "$want" ]]; then
  echo "clang-format $version here, the check is written for $want: skipped"
  exit 77
fi
cd "$src" || exit 1
if ! files=$(git ls-files -- '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null) || [[ -z $files ]]; then
  echo "$src is not a git checkout: nothing to list, skipped"
  exit 77
fi
n=$(wc -l <<<"$files")
# One clang-format for all of them (a process a file took a minute); it names each file it
# would change in its diagnostics ("FILE:LINE:COL: error: code should be clang-formatted").
existing=()
while IFS= read -r f; do
  [[ -f $f ]] && existing+=("$f")  # a file deleted in the work tree, not yet in git: skipped
done <<<"$files"
out=$(clang-format --dry-run --Werror "${existing[@]}" 2>&1)
status=$?
mapfile -t bad < <(sed -nE 's/^([^:]+):[0-9]+:[0-9]+: error: code should be clang-formatted.*/\1/p' \
  <<<"$out" | sort -u)
if ((status != 0 && ${#bad[@]} == 0)); then
  echo "FAIL: clang-format exited $status without naming a file:"
  head -20 <<<"$out"
  exit 1
fi
if ((${#bad[@]})); then
  echo "FAIL: ${#bad[@]} of $n files are not as clang-format writes them:"
  printf '  %s\n' "${bad[@]}"
  echo "fix: clang-format -i ${bad[*]}"
  exit 1
fi
echo "ok: $n files as clang-format $version writes them"
