#!/usr/bin/env bash
# mtnlg-curate quality: a classifier trained on the King James Bible (positive) against generated
# link spam (negative) separates held-out documents; its scores are what Debian's `fasttext
# predict-prob` prints for the same lines (the Pile's preprocessing written in Python here); a
# rerun trains the same model bytes; the Pareto filter keeps what numpy's RandomState(seed).pareto
# keeps; the threshold filter keeps scores >= T; bad input is named.
# Usage: tests/curate/quality_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
# shellcheck source=tests/curate/curate_lib.sh
source "$2/tests/curate/curate_lib.sh"
curate_setup "$1" "$2"
command -v fasttext >/dev/null || { echo "FAIL: the fasttext CLI is missing (scripts/setup.sh installs it)"; exit 1; }

# The corpus: chapters of the KJV (scripts/demo_corpus_jsonl.py's) and generated spam.
$py "$src/scripts/demo_corpus_jsonl.py" raw >/dev/null || exit 1
$py - <<'PY'
import json, random
rng = random.Random(2)
kjv = [json.loads(l)["text"] for l in open("raw/kjv.jsonl")]
spam = ["click", "here", "buy", "now", "cheap", "login", "cookie", "menu", "home", "share", "free",
        "deal", "offer", "subscribe", "https://example.com/a", "best", "price", "win"]
def junk():
    return " ".join(rng.choice(spam) for _ in range(rng.randint(20, 300))) + "\nmenu\n"
with open("pos.jsonl", "w") as f:
    for t in kjv[:500]:
        f.write(json.dumps({"text": t}) + "\n")
with open("neg.jsonl", "w") as f:
    for _ in range(500):
        f.write(json.dumps({"text": junk()}) + "\n")
with open("held.jsonl", "w") as f:
    for i, t in enumerate(kjv[500:700]):
        f.write(json.dumps({"id": i, "kind": "kjv", "text": t}) + "\n")
        f.write(json.dumps({"id": i, "kind": "spam", "text": junk(), "quality_score": "old"}) + "\n")
PY
train=(quality train --positive pos.jsonl --negative neg.jsonl --dim 16 --bucket 200000 --seed 3
  --log-level warn)
"$curate" "${train[@]}" --output m.bin
"$curate" "${train[@]}" --output m2.bin
check "the model is a fastText model the CLI reads" fasttext dump m.bin args
check "a rerun trains the same model bytes" cmp -s m.bin m2.bin
check "no temporary file is left" [ -z "$(ls ./*.tmp 2>/dev/null)" ]

"$curate" quality score --model m.bin --input held.jsonl --output scored.jsonl --log-level warn
# The same lines through the fasttext CLI: the Pile's preprocessing, written in Python.
$py -c "
import json
with open('lines.txt', 'w', encoding='utf-8') as f:
    for l in open('held.jsonl', encoding='utf-8'):
        f.write(json.loads(l)['text'].replace('\n', ' ')[:4000][-1500:] + '\n')"
fasttext predict-prob m.bin lines.txt 2 >cli.txt
check "each score is fasttext predict-prob's __label__hq probability" $py - <<'PY'
import json, sys
ours = [json.loads(l) for l in open("scored.jsonl")]
cli = []
for line in open("cli.txt"):
    f = line.split()
    d = dict(zip(f[0::2], map(float, f[1::2])))
    cli.append(d.get("__label__hq", 0.0))
ok = len(ours) == len(cli) == 400
ok &= all(abs(r["quality_score"] - c) <= 1e-5 * max(c, 1e-3) + 1e-7 for r, c in zip(ours, cli))
sys.exit(0 if ok else 1)
PY
check "the classifier separates held-out scripture from spam" $py - <<'PY'
import json, sys
rs = [json.loads(l) for l in open("scored.jsonl")]
good = sum(r["quality_score"] > 0.5 for r in rs if r["kind"] == "kjv")
bad = sum(r["quality_score"] < 0.5 for r in rs if r["kind"] == "spam")
print(good, "of 200 scripture above 0.5,", bad, "of 200 spam below")
sys.exit(0 if good >= 190 and bad >= 190 else 1)
PY
check "members are carried, an existing score replaced in place" $py -c "
import json
rs = [json.loads(l) for l in open('scored.jsonl')]
raise SystemExit(0 if list(rs[1].keys()) == ['id', 'kind', 'text', 'quality_score']
                 and all(isinstance(r['quality_score'], float) for r in rs) else 1)"

"$curate" quality filter --input scored.jsonl --output pareto.jsonl --pareto-alpha 3 --seed 7 \
  --report pareto.json --log-level warn
check "the Pareto filter keeps what numpy's RandomState(7).pareto(3) keeps" $py - <<'PY'
import json, sys
import numpy as np
rs = [json.loads(l) for l in open("scored.jsonl")]
r = np.random.RandomState(7)
want = [l for l, x in zip(open("scored.jsonl"), rs) if r.pareto(3.0) > 1 - x["quality_score"]]
got = open("pareto.jsonl").readlines()
rep = json.load(open("pareto.json"))
print(len(got), "kept of", len(rs))
sys.exit(0 if got == want and rep["kept"] == len(got) and 0 < len(got) < len(rs) else 1)
PY
"$curate" quality filter --input scored.jsonl --output thr.jsonl --threshold 0.5 --log-level warn
check "--threshold keeps the scores at or above it" $py -c "
import json
want = [l for l in open('scored.jsonl') if json.loads(l)['quality_score'] >= 0.5]
raise SystemExit(0 if open('thr.jsonl').readlines() == want else 1)"

expect 2 "--threshold T or --pareto-alpha A" -- quality filter --input scored.jsonl --output x.jsonl
expect 2 "excludes" -- quality filter --input scored.jsonl --output x.jsonl --threshold 0.5 \
  --pareto-alpha 3
expect 2 "held.jsonl:1.*no number in 'quality_score'" -- quality filter --input held.jsonl \
  --output x.jsonl --threshold 0.5
expect 4 "no such model" -- quality score --model missing.bin --input held.jsonl --output x.jsonl
head -c 1000 m.bin >cut.bin
expect 4 "not a fastText model" -- quality score --model cut.bin --input held.jsonl --output x.jsonl
check "nothing is left under an output's name after an error" [ ! -e x.jsonl ]

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
