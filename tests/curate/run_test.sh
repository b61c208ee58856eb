#!/usr/bin/env bash
# mtnlg-curate run, the worked example of docs/curation.md end to end on Debian's text: KJV
# chapters (a "books" dataset), fortunes, and HTML documentation in a WARC (a "web" dataset),
# with planted duplicates across them and a task file made of KJV verses; extract, clean,
# quality (trained on books against web), dedup, decontaminate, tokens, the report and the
# blend; then mtnlg-train trains on the blend. A second run does nothing and changes no byte; a
# run killed part way and started again ends with the same bytes. Bad configs are named.
# Usage: tests/curate/run_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
# shellcheck source=tests/curate/curate_lib.sh
source "$2/tests/curate/curate_lib.sh"
curate_setup "$1" "$2"

$py "$src/scripts/demo_corpus_jsonl.py" raw >/dev/null || exit 1
mkdir -p books fortunes web tasks
$py - <<'PY'
import gzip, glob, json, random
rng = random.Random(1)
kjv = [json.loads(l)["text"] for l in open("raw/kjv.jsonl")]
fortunes = [json.loads(l)["text"] for l in open("raw/fortunes.jsonl")]
with open("books/kjv.jsonl", "w") as f:
    for t in kjv[:300]:
        f.write(json.dumps({"text": t}) + "\n")
with open("fortunes/fortunes.jsonl", "w") as f:
    for t in fortunes[:2000] + kjv[:20]:  # 20 chapters also in books: dedup keeps books'
        f.write(json.dumps({"text": t}) + "\n")
records = []
for i, p in enumerate(sorted(glob.glob("/usr/share/doc/libffi8/html/*.html"))):
    body = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + open(p, "rb").read()
    records.append(b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: https://example.org/%d\r\n"
                   b"Content-Length: %d\r\n\r\n" % (i, len(body)) + body + b"\r\n\r\n")
with open("web/crawl.warc.gz", "wb") as f:
    for r in records:
        f.write(gzip.compress(r))
with open("tasks/lambada.jsonl", "w") as f:  # passages of three chapters: decontaminated
    for t in kjv[100:103]:
        f.write(json.dumps({"text": " ".join(t.split()[40:80])}) + "\n")
PY
cat >corpus.yaml <<EOF
output_dir: out
training_tokens: 1000000
datasets:
  - {name: books, inputs: [books/*.jsonl], steps: [clean], weight: 2}
  - {name: fortunes, inputs: [fortunes/*.jsonl], steps: [clean], weight: 1}
  - {name: web, inputs: [web/*.warc.gz], steps: [extract, clean, quality], weight: 1}
clean: {min_chars: 20, short_javascript: 256, languages: [en], min_language_score: 0.5}
quality:
  train: {positive: [books], negative: [fortunes], dim: 16, bucket: 100000, seed: 2}
  threshold: 0.0
  seed: 1
dedup: {priority: [books, fortunes, web], threshold: 0.8}
decontaminate: {task_files: {lambada: tasks/lambada.jsonl}}
tokenizer: {vocab_file: $src/data/gpt2/encoder.json, merge_file: $src/data/gpt2/vocab.bpe}
EOF
"$curate" run --config corpus.yaml --threads 2 --log-level warn
check "tokens, report and blend are written" \
  test -s out/tokens/books_text_document.bin -a -s out/tokens/web_text_document.idx -a -s out/report.md \
  -a -s out/blend.yaml
check "the report counts each step: dedup removed fortunes' copies of books, decontamination cut" \
  $py - <<'PY'
import json, sys
r = {d["dataset"]: d for d in json.load(open("out/report.json"))["datasets"]}
print({k: (v["documents"], v["tokens"], round(v["weight"], 3), round(v["epochs"], 3)) for k, v in r.items()})
f, b, w = r["fortunes"]["documents"], r["books"]["documents"], r["web"]["documents"]
ok = f["dedup"] <= f["clean"] - 20 and b["dedup"] == b["clean"]
books = {json.loads(l)["text"] for l in open("out/final/books.jsonl")}
ok &= not any(json.loads(l)["text"] in books for l in open("out/final/fortunes.jsonl"))
ok &= b["decontaminate"] >= b["dedup"] and w["extract"] == w["quality"] > 0
ok &= abs(r["books"]["weight"] - 0.5) < 1e-12 and all(v["tokens"] > 0 for v in r.values())
ok &= abs(r["books"]["epochs"] - 0.5 * 1e6 / r["books"]["tokens"]) < 1e-9
sys.exit(0 if ok else 1)
PY
check "decontamination removed the task passages' 13-grams from books" $py -c "
import json, re
words = lambda t: re.findall(r'\w+', t.lower())
grams = set()
for l in open('tasks/lambada.jsonl'):
    w = words(json.loads(l)['text'])
    grams |= {' '.join(w[i:i + 13]) for i in range(len(w) - 12)}
left = 0
for l in open('out/final/books.jsonl'):
    w = words(json.loads(l)['text'])
    left += sum(' '.join(w[i:i + 13]) in grams for i in range(len(w) - 12))
before = sum(sum(' '.join(w[i:i + 13]) in grams for i in range(len(w) - 12))
             for w in (words(json.loads(l)['text']) for l in open('books/kjv.jsonl')))
print(before, 'task 13-grams in books before,', left, 'after')
raise SystemExit(0 if before > 50 and left == 0 else 1)"
find out -type f ! -name '*.tmp' -exec md5sum {} + | sort >first.md5
"$curate" run --config corpus.yaml --log-level warn
find out -type f ! -name '*.tmp' -exec md5sum {} + | sort >second.md5
check "a second run does nothing and changes no byte" cmp -s first.md5 second.md5
rm -rf out/dedup out/tokens out/final
timeout -s KILL 1.5 "$curate" run --config corpus.yaml --threads 2 --log-level warn >/dev/null 2>&1
"$curate" run --config corpus.yaml --threads 2 --log-level warn
find out -type f ! -name '*.tmp' -exec md5sum {} + | sort >third.md5
check "a run killed part way and started again ends with the same bytes" cmp -s first.md5 third.md5

# The blend trains.
"$build/mtnlg-train" --config "$src/configs/demo-cpu.yaml" --set "$(sed -n 's/^    - /- /p' out/blend.yaml |
  $py -c 'import sys; print("data.blend=[" + ", ".join(l.strip()[2:] for l in sys.stdin) + "]")')" \
  --set data.cache_dir=cache --set schedule.train_iters=3 --set schedule.warmup_tokens=0 \
  --set logging.metrics_file=m.jsonl --set eval.interval=0 --set checkpoint.dir= --threads 2 \
  --log-level warn
check "mtnlg-train trains on the corpus's blend" test "$(grep -c '"iteration"' m.jsonl)" -ge 3

printf 'output_dir: o\ndatasets:\n  - {name: a, inputs: [books/*.jsonl], stepz: [clean]}\n' >bad1.yaml
expect 2 "unknown key 'datasets\[0\].stepz'" -- run --config bad1.yaml
printf 'output_dir: o\ndatasets:\n  - {name: a, inputs: [nothing/*.jsonl]}\n' >bad2.yaml
expect 4 "matches no file" -- run --config bad2.yaml
printf 'output_dir: o\ndatasets:\n  - {name: a, inputs: [books/*.jsonl]}\ndedup: {priority: [b]}\n' >bad3.yaml
expect 2 "dedup.priority names 'b', which is no dataset" -- run --config bad3.yaml
printf 'output_dir: [o]\ndatasets:\n  - {name: a, inputs: [books/*.jsonl]}\n' >bad5.yaml
expect 2 "'output_dir' has the wrong type" -- run --config bad5.yaml
printf 'output_dir: o\ndatasets:\n  - {name: a, inputs: [books/*.jsonl], steps: [clean, extract]}\nclean: {}\n' >bad4.yaml
expect 2 "extract, clean, quality, in that order" -- run --config bad4.yaml

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
