#!/usr/bin/env bash
# mtnlg-curate dedup and dedup minhash against the independent Python references
# (tests/reference/curate_reference.py) on a generated corpus of three datasets with planted
# exact and near duplicates (tests/curate/make_dedup_corpus.py), in plain, .gz and .zst shards:
# the same signatures bit for bit (--hash datasketch), the same groups and kept documents, the
# kept lines unchanged; the same bytes on 1 and 2 threads and after a kill -9 and a rerun; bad
# input named with its file and line, or skipped and counted.
# Usage: tests/curate/dedup_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
# shellcheck source=tests/curate/curate_lib.sh
source "$2/tests/curate/curate_lib.sh"
curate_setup "$1" "$2"

$py "$src/tests/curate/make_dedup_corpus.py" corp --docs 300 --seed 7 >/dev/null || exit 1
inputs=(wiki=corp/wiki/wiki.jsonl books=corp/books/books.jsonl.gz cc=corp/cc/cc-00.jsonl
  cc=corp/cc/cc-01.jsonl.zst)
flags=()
for i in "${inputs[@]}"; do flags+=(--input "$i"); done
run_dedup() {  # OUT_DIR THREADS [more flags]
  local out=$1 threads=$2
  shift 2
  "$curate" dedup "${flags[@]}" --priority wiki,books,cc --hash datasketch --threads "$threads" \
    --output-dir "$out" --report "$out/groups.jsonl" --no-progress-bar --log-level warn "$@"
}

# 1. Signatures: bit for bit the reference's datasketch, each shard, on 1 and 2 threads.
for shard in corp/wiki/wiki.jsonl corp/books/books.jsonl.gz corp/cc/cc-01.jsonl.zst; do
  base=$(basename "$shard")
  "$curate" dedup minhash --input "$shard" --output "$base.ours.npy" --hash datasketch --seed 3 \
    --num-perm 64 --threads 2 --log-level warn
  "$curate" dedup minhash --input "$shard" --output "$base.one.npy" --hash datasketch --seed 3 \
    --num-perm 64 --threads 1 --log-level warn
  $py "$ref" minhash "$shard" "$base.ref.npy" 64 3
  check "$base: signatures equal datasketch's (numpy reference)" \
    $py -c "import numpy as n,sys; a=n.load(sys.argv[1]); b=n.load(sys.argv[2]); sys.exit(not (a.shape==b.shape and a.shape[0]>50 and (a==b).all()))" \
    "$base.ours.npy" "$base.ref.npy"
  check "$base: 1 and 2 threads write the same bytes" cmp -s "$base.ours.npy" "$base.one.npy"
done

# 2. Groups and kept documents: the reference's; kept lines byte for byte the inputs'.
run_dedup out 2 || { echo "FAIL: dedup exited $?"; failures=$((failures + 1)); }
$py "$ref" dedup "$(IFS=,; echo "${inputs[*]}")" wiki,books,cc 0.8 128 1 9 13 ref.json
check "the report lists the reference's groups, each keeping the reference's document" \
  $py - <<'PY'
import json, sys
ref = json.load(open("ref.json"))
files = ["corp/wiki/wiki.jsonl", "corp/books/books.jsonl.gz", "corp/cc/cc-00.jsonl", "corp/cc/cc-01.jsonl.zst"]
ours = [json.loads(l) for l in open("out/groups.jsonl")]
groups = sorted(sorted([files.index(m["file"]), m["line"]] for m in g["members"]) for g in ours)
kept_in_groups = sorted([files.index(g["kept"]["file"]), g["kept"]["line"]] for g in ours)
ref_kept = set(map(tuple, ref["kept"]))
ok = groups == sorted(ref["groups"]) and all(tuple(k) in ref_kept for k in kept_in_groups)
print(len(groups), "groups, reference", len(ref["groups"]))
for g in ours:  # every listed pair is at or above the threshold, between two members
    ok &= all(p["jaccard"] >= 0.8 and 0 <= p["a"] < g["size"] and 0 <= p["b"] < g["size"] for p in g["pairs"])
sys.exit(0 if ok and len(groups) > 20 else 1)
PY
check "each output holds exactly the kept input lines, unchanged and in order" \
  $py - "$ref" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0])
import curate_reference as c
ref = json.load(open("ref.json"))
kept = set(map(tuple, ref["kept"]))
files = ["corp/wiki/wiki.jsonl", "corp/books/books.jsonl.gz", "corp/cc/cc-00.jsonl", "corp/cc/cc-01.jsonl.zst"]
ok = True
for i, f in enumerate(files):
    want = [l for n, l in enumerate(c.open_text(f), 1) if (i, n) in kept]
    got = list(c.open_text("out/" + f.split("/", 1)[1]))
    ok &= want == got and len(got) > 0
sys.exit(0 if ok else 1)
PY
check "the summary counts every document once" \
  $py -c "
import json; s = json.load(open('out/dedup_summary.json'))
d = s['datasets']; tot = sum(v['documents'] for v in d.values())
ok = tot == s['documents'] and all(v['kept'] + v['exact_duplicates_removed'] + v['fuzzy_duplicates_removed'] == v['documents'] for v in d.values())
ok &= (s['bands'], s['rows']) == (9, 13) and sum(v['exact_duplicates_removed'] for v in d.values()) > 0
raise SystemExit(0 if ok else 1)"

# 3. The same bytes on one thread, and after a kill -9 and a rerun.
run_dedup one 1
check "1 and 2 threads write the same files" diff -r out one
for delay in 0.05 0.15; do
  timeout -s KILL "$delay" "$curate" dedup "${flags[@]}" --priority wiki,books,cc --hash datasketch \
    --output-dir killed --report killed/groups.jsonl --log-level warn >/dev/null 2>&1
  partial=0
  for f in $(cd out && find . -type f); do
    [[ -e killed/$f ]] && ! cmp -s "out/$f" "killed/$f" && partial=1
  done
  check "killed after ${delay}s: every final file present is complete" [ "$partial" = 0 ]
done
run_dedup killed 2
check "the rerun after the kills writes the same files as one clean run" \
  diff -r out killed --exclude='*.tmp'

# 3b. A cluster's steps as separate processes (3 tasks) through a work directory: the bytes of
# one process.
for step in signatures components output; do
  for t in 0 1 2; do
    [[ $step == components && $t -gt 0 ]] && continue
    "$curate" dedup "${flags[@]}" --priority wiki,books,cc --hash datasketch --step $step \
      --task-index $t --task-count 3 --work-dir work3 --output-dir steps --report steps/groups.jsonl \
      --log-level warn || echo "FAIL: --step $step task $t"
  done
done
check "signatures, components and output as 3 tasks write one process's files" \
  diff -r out steps --exclude=.work
expect 4 "signatures of corp/wiki/wiki.jsonl are missing.*--step signatures" -- dedup \
  "${flags[@]}" --priority wiki,books,cc --step components --work-dir empty-work --output-dir e \
  --report e/r.jsonl
expect 2 "--task-index 3 is not below --task-count 3" -- dedup "${flags[@]}" --priority \
  wiki,books,cc --step signatures --task-index 3 --task-count 3 --output-dir e --report e/r.jsonl
check "the candidates' scratch file is gone after the steps (unnamed from the start)" \
  bash -c '! compgen -G "work3/spill-*" >/dev/null'
# 3c. The components step's memory budget: refused before allocating when the estimate is larger;
# within it, a smaller batch writes the same files.
expect 2 "components step needs about 6[0-9] MB for [0-9]* documents.*more than --memory-mb 32" -- \
  dedup "${flags[@]}" --priority wiki,books,cc --hash datasketch --step components \
  --work-dir work3 --memory-mb 32 --output-dir e --report e/r.jsonl
"$curate" dedup "${flags[@]}" --priority wiki,books,cc --hash datasketch --memory-mb 32 \
  --batch-mb 1 --output-dir budget --report budget/groups.jsonl --log-level warn
check "--memory-mb 32 --batch-mb 1 writes the files of an unbounded run" \
  diff -r out budget --exclude=.work

# 4. The default hash family runs (its accuracy is bench/curate_bench.sh's business).
"$curate" dedup "${flags[@]}" --priority wiki,books,cc --output-dir fast --report fast/g.jsonl \
  --log-level warn
check "--hash xxh3 (default): groups found" [ "$(wc -l <fast/g.jsonl)" -gt 20 ]

# 5. Bad input: named, with the fix; or skipped and counted.
expect 2 "--priority does not name dataset 'cc'" -- \
  dedup "${flags[@]}" --priority wiki,books --output-dir e --report e/r.jsonl
expect 2 "expected NAME=FILE" -- \
  dedup --input corp/wiki/wiki.jsonl --priority wiki --output-dir e --report e/r.jsonl
expect 2 "dedup needs --report" -- \
  dedup --input wiki=corp/wiki/wiki.jsonl --priority wiki --output-dir e
expect 4 "missing.jsonl" -- \
  dedup --input wiki=missing.jsonl --priority wiki --output-dir e --report e/r.jsonl
head -c 20000 corp/books/books.jsonl.gz >cut.jsonl.gz
expect 4 "cut.jsonl.gz" -- \
  dedup --input books=cut.jsonl.gz --priority books --output-dir e --report e/r.jsonl
check "nothing is left under a final name after an error" [ ! -e e/books/cut.jsonl.gz ]
{
  echo '{"text": "a fine document of some length"}'
  echo '{"body": "no text key here"}'
  printf '{"text": "bad \xff byte"}\n'
  echo '{"text": "another fine document"}'
} >bad.jsonl
expect 2 "bad.jsonl:2" -- \
  dedup --input x=bad.jsonl --priority x --output-dir e --report e/r.jsonl
expect 2 "bad.jsonl:2" -- dedup minhash --input bad.jsonl --output e.npy
"$curate" dedup --input x=bad.jsonl --priority x --output-dir skip --report skip/r.jsonl \
  --bad-records skip --log-level warn >skip.txt 2>&1
check "--bad-records skip: skipped records counted in the summary and the log" \
  $py -c "
import json; s = json.load(open('skip/dedup_summary.json'))
raise SystemExit(0 if s['datasets']['x']['bad_records_skipped'] == 2 and s['documents'] == 2 else 1)"
check "--bad-records skip: the kept output holds the good records only" \
  [ "$(wc -l <skip/x/bad.jsonl)" = 2 ]
check "--bad-records skip: the log names the reasons" grep -q "invalid UTF-8" skip.txt
: >empty.jsonl
"$curate" dedup --input x=empty.jsonl --priority x --output-dir emp --report emp/r.jsonl \
  --log-level warn
check "an empty shard dedups to an empty shard" [ -e emp/x/empty.jsonl ] && [ ! -s emp/x/empty.jsonl ]

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
