#!/usr/bin/env bash
# mtnlg-curate's fuzzy dedup as Slurm array jobs on the local cluster (scripts/slurm/cluster.sh;
# SLURM_CONF set): scripts/slurm/curate_dedup.sh with 3 tasks writes the bytes of one process.
# Usage: tests/curate/dedup_slurm_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
curate=$build/mtnlg-curate
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$src/tests/curate/make_dedup_corpus.py" "$tmp/corp" --docs 300 --seed 3 >/dev/null || exit 1
args=(--input "wiki=$tmp/corp/wiki/wiki.jsonl" --input "books=$tmp/corp/books/books.jsonl.gz"
  --input "cc=$tmp/corp/cc/cc-00.jsonl" --input "cc=$tmp/corp/cc/cc-01.jsonl.zst"
  --priority wiki,books,cc)
"$curate" dedup "${args[@]}" --output-dir "$tmp/one" --report "$tmp/one/groups.jsonl" \
  --log-level warn || { echo "FAIL: one process"; exit 1; }
cd "$tmp" || exit 1
if ! MTNLG_CURATE=$curate "$src/scripts/slurm/curate_dedup.sh" --wait 3 "${args[@]}" \
  --output-dir "$tmp/array" --report "$tmp/array/groups.jsonl" --work-dir "$tmp/work"; then
  echo "FAIL: the Slurm jobs failed:"
  tail -n 20 "$tmp"/slurm-*.out
  exit 1
fi
if diff -r "$tmp/one" "$tmp/array" --exclude=.work; then
  echo "ok: 3 Slurm array tasks per step write one process's files"
  echo "1 passed, 0 failed"
else
  echo "FAIL: the Slurm array run differs from one process"
  echo "0 passed, 1 failed"
  exit 1
fi
