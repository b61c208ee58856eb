#!/usr/bin/env bash
# mtnlg-curate decontaminate against filter_ngrams.py's algorithm written in Python's own strings,
# dicts and re (tests/reference/curate_reference.py decontaminate) on a generated shard with
# planted task passages (tests/curate/make_decon_corpus.py): the same pieces with the same
# split_ids and members; the same bytes on 1 and 2 threads; compressed shards; bad input named.
# Usage: tests/curate/decontaminate_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
# shellcheck source=tests/curate/curate_lib.sh
source "$2/tests/curate/curate_lib.sh"
curate_setup "$1" "$2"
same_records() {  # A B: the same JSON records in the same order
  $py -c "
import json, sys
a = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8')]
b = [json.loads(l) for l in open(sys.argv[2], encoding='utf-8')]
print(len(a), 'records,', len(b), 'in the reference')
sys.exit(0 if a == b and len(a) > 100 else 1)" "$1" "$2"
}

$py "$src/tests/curate/make_decon_corpus.py" c --docs 500 --seed 4 >/dev/null || exit 1
tasks=(--task-file lambada=c/lambada.jsonl --task-file piqa=c/piqa.jsonl)
"$curate" decontaminate --input c/train.jsonl --output ours.jsonl "${tasks[@]}" --threads 2 \
  --report report.json --log-level warn
$py "$ref" decontaminate c/train.jsonl ref.jsonl lambada=c/lambada.jsonl piqa=c/piqa.jsonl
check "the pieces, split_ids and members equal the reference's" same_records ours.jsonl ref.jsonl
check "the planted cases all happen: split, removed, over --splits-count, trimmed" \
  $py -c "
import json; r = json.load(open('report.json'))
ok = all(r[k] > 0 for k in ('documents_split', 'documents_removed', 'documents_over_split_limit',
                             'documents_trimmed'))
ok &= r['ngrams_below_threshold'] < r['task_ngrams']  # the common passage stays
raise SystemExit(0 if ok and r['documents'] == 500 else 1)"
check "an existing split_id is extended, other members carried" \
  $py -c "
import json
rs = [json.loads(l) for l in open('ours.jsonl')]
ok = any(r['split_id'].startswith('old-') and '-lambada-piqa-' in r['split_id'] for r in rs)
ok &= any('url' in r and r['score'] == 0.5 for r in rs)
raise SystemExit(0 if ok else 1)"
"$curate" decontaminate --input c/train.jsonl --output one.jsonl "${tasks[@]}" --threads 1 \
  --log-level warn
check "1 and 2 threads write the same bytes" cmp -s ours.jsonl one.jsonl
gzip -k c/train.jsonl
"$curate" decontaminate --input c/train.jsonl.gz --output ours.jsonl.zst "${tasks[@]}" \
  --log-level warn
check "a .gz shard in, a .zst shard out: the same records" \
  same_records <($py -c "import zstandard,sys; sys.stdout.write(zstandard.ZstdDecompressor().stream_reader(open('ours.jsonl.zst','rb')).read().decode())") ref.jsonl

# Passages joined by other separators (cuts inside passages and words), next to 'İ' and to
# capital sigmas final in the text but not in the tail a cut leaves, in both passes.
$py "$src/tests/curate/make_decon_corpus.py" e --docs 300 --seed 6 --edges >/dev/null || exit 1
edge_tasks=(--task-file lambada=e/lambada.jsonl --task-file piqa=e/piqa.jsonl)
"$curate" decontaminate --input e/train.jsonl --output edges.jsonl "${edge_tasks[@]}" \
  --report edges.json --log-level warn
$py "$ref" decontaminate e/train.jsonl edges-ref.jsonl lambada=e/lambada.jsonl piqa=e/piqa.jsonl
check "edge cases (other separators, 'İ', final sigmas at cuts): the reference's pieces" \
  same_records edges.jsonl edges-ref.jsonl
check "edge cases: documents were cut many times" \
  $py -c "
import json; r = json.load(open('edges.json'))
raise SystemExit(0 if r['documents_split'] > 50 and r['documents_trimmed'] > 50 else 1)"

expect 2 "unknown task; the fix: one of" -- \
  decontaminate --input c/train.jsonl --output e.jsonl --task-file mmlu=c/piqa.jsonl
# Nested task records as the script reads them from Hugging Face's datasets: natural_questions'
# question.text and coqa's questions (the lambada passages, two and three to a record here).
$py - <<'PY'
import json
piqa = [json.loads(l)["goal"] for l in open("c/piqa.jsonl")]
lamb = [json.loads(l)["text"] for l in open("c/lambada.jsonl")]
with open("c/nq.jsonl", "w") as f:
    for i, g in enumerate(piqa):
        f.write(json.dumps({"id": str(i), "question": {"text": g, "tokens": g.split()},
                            "document": {"title": "t"}}) + "\n")
    f.write(json.dumps({"id": "x", "question": "a plain string, not the nested form"}) + "\n")
with open("c/coqa.jsonl", "w") as f:
    for i in range(0, len(lamb), 5):
        f.write(json.dumps({"story": "s", "questions": lamb[i:i + 2 + i % 2]}) + "\n")
    f.write(json.dumps({"story": "s", "questions": [1, 2]}) + "\n")
PY
nested=(--task-file natural_questions=c/nq.jsonl --task-file coqa=c/coqa.jsonl)
"$curate" decontaminate --input c/train.jsonl --output nested.jsonl "${nested[@]}" \
  --report nested.json --log-level warn
$py "$ref" decontaminate c/train.jsonl nested-ref.jsonl natural_questions=c/nq.jsonl \
  coqa=c/coqa.jsonl
check "natural_questions (question.text) and coqa (questions[]): the reference's pieces" \
  same_records nested.jsonl nested-ref.jsonl
check "their n-grams were read and cut documents (split_id natural_questions-coqa-...)" \
  $py -c "
import json
r = json.load(open('nested.json')); rs = [json.loads(l) for l in open('nested.jsonl')]
ok = r['task_ngrams'] > 100 and r['documents_split'] > 0
ok &= any('natural_questions-coqa-' in x['split_id'] for x in rs)
raise SystemExit(0 if ok else 1)"
expect 4 "missing.jsonl" -- \
  decontaminate --input c/train.jsonl --output e.jsonl --task-file lambada=missing.jsonl
printf '{"text": "fine"}\n{"body": "no text"}\n' >bad.jsonl
expect 2 "bad.jsonl:2" -- \
  decontaminate --input bad.jsonl --output e.jsonl "${tasks[@]}"
check "nothing is left under the output's name after an error" [ ! -e e.jsonl ]
"$curate" decontaminate --input bad.jsonl --output skip.jsonl "${tasks[@]}" --bad-records skip \
  --report skip.json --log-level warn >/dev/null 2>&1
check "--bad-records skip: counted, the good record written" \
  $py -c "
import json; r = json.load(open('skip.json'))
raise SystemExit(0 if r['bad_records_skipped'] == 1 and r['pieces_written'] == 1 else 1)"

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
