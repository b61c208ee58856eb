#!/usr/bin/env bash
# mtnlg-curate clean against a Python reference of its definition (unicodedata's NFC and Cc,
# len() in code points, str.lower(), GPT-2's encoder from scripts/prepare_demo_data.py) on
# fortunes and KJV chapters with planted short javascript notices, control characters and
# decomposed accents; CLD2's languages on sentences of English, German and French; 1 and 2
# threads alike; bad input named.
# Usage: tests/curate/clean_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
# shellcheck source=tests/curate/curate_lib.sh
source "$2/tests/curate/curate_lib.sh"
curate_setup "$1" "$2"

$py "$src/scripts/demo_corpus_jsonl.py" raw >/dev/null || exit 1
$py - <<'PY'
import json, random
rng = random.Random(5)
docs = [json.loads(l)["text"] for l in open("raw/fortunes.jsonl")][:1500]
docs += [json.loads(l)["text"] for l in open("raw/kjv.jsonl")][:100]
docs += ["Please enable JavaScript to view this page.", "javascript:void(0) " * 3,
         "Cafe\u0301 au lait\u0007 with a bell\u0000 and a tab\there.", "\x1b[31mred\x1b[0m text",
         "Line one\r\nline two"]
rng.shuffle(docs)
with open("in.jsonl", "w") as f:
    for i, t in enumerate(docs):
        f.write(json.dumps({"id": i, "text": t}, ensure_ascii=i % 2 == 0) + "\n")
PY
flags=(--min-chars 40 --short-javascript 256 --min-gpt2-tokens 16 --vocab-file "$src/data/gpt2/encoder.json"
  --merge-file "$src/data/gpt2/vocab.bpe" --log-level warn)
"$curate" clean --input in.jsonl --output out.jsonl --report rep.json --threads 2 "${flags[@]}"
"$curate" clean --input in.jsonl --output one.jsonl --threads 1 "${flags[@]}"
check "1 and 2 threads write the same bytes" cmp -s out.jsonl one.jsonl
check "kept records and rule counts equal the Python reference's" $py - "$src" <<'PY'
import json, sys, unicodedata, collections
sys.path.insert(0, sys.argv[1] + "/scripts")
from prepare_demo_data import GPT2Tokenizer
tok = GPT2Tokenizer(sys.argv[1] + "/data/gpt2")
removed, kept = collections.Counter(), []
normalized = 0
for line in open("in.jsonl", encoding="utf-8"):
    r = json.loads(line)
    t = unicodedata.normalize("NFC", r["text"])
    t = "".join(c for c in t if c in "\t\n" or unicodedata.category(c) != "Cc")
    normalized += t != r["text"]
    if len(t) < 40:
        removed["min_chars"] += 1
    elif len(t) < 256 and "javascript" in t.lower():
        removed["short_javascript"] += 1
    elif len(t) < 8 * 16 and len(tok.encode(t)) < 16:
        removed["min_gpt2_tokens"] += 1
    else:
        r["text"] = t
        kept.append(r)
ours = [json.loads(l) for l in open("out.jsonl", encoding="utf-8")]
rep = json.load(open("rep.json"))
print(len(ours), "kept,", dict(removed), "removed;", normalized, "normalized")
ok = ours == kept and rep["removed"] == dict(removed) and rep["normalized"] == normalized
ok &= all(removed[k] > 0 for k in ("min_chars", "short_javascript", "min_gpt2_tokens"))
sys.exit(0 if ok and normalized >= 3 else 1)
PY
check "a record whose text did not change keeps its line as it was" $py -c "
import json
ins = {json.loads(l)['id']: l for l in open('in.jsonl')}
outs = [(json.loads(l), l) for l in open('out.jsonl')]
same = [(r, l) for r, l in outs if json.loads(ins[r['id']])['text'] == r['text']]
raise SystemExit(0 if len(same) > 1000 and all(ins[r['id']] == l for r, l in same) else 1)"

"$curate" clean --input in.jsonl --output gopher.jsonl --report gopher.json --gopher --log-level warn
check "--gopher: the kept records and the count of every rule equal the Python reference's" \
  $py - <<'PY'
import collections, json, re, sys, unicodedata
def verdict(t):
    w = t.split()
    n = len(w)
    if n < 50: return "gopher_short_doc"
    if n > 100000: return "gopher_long_doc"
    mean = sum(map(len, w)) / n
    if mean < 3: return "gopher_below_avg_threshold"
    if mean > 10: return "gopher_above_avg_threshold"
    if t.count("#") / n > 0.1: return "gopher_too_many_hashes"
    if (t.count("...") + t.count("\u2026")) / n > 0.1: return "gopher_too_many_ellipsis"
    lines = t.splitlines()
    nl = max(len(lines), 1)
    if sum(l.lstrip().startswith("\u2022") for l in lines) / nl > 0.9: return "gopher_too_many_bullets"
    if sum(l.rstrip().endswith("...") or l.rstrip().endswith("\u2026") for l in lines) / nl > 0.3:
        return "gopher_too_many_end_ellipsis"
    if sum(any(c.isalpha() for c in x) for x in w) / n < 0.8: return "gopher_below_alpha_threshold"
    if sum(x in {"the", "be", "to", "of", "and", "that", "have", "with"} for x in w) < 2:
        return "gopher_enough_stop_words"
    def dups(xs):
        seen, e, c = set(), 0, 0
        for x in xs:
            if x in seen: e += 1; c += len(x)
            else: seen.add(x)
        return e, c
    paras = re.split(r"\n{2,}", t.strip())
    e, c = dups(paras)
    if e / len(paras) > 0.3: return "dup_para_frac"
    if c / len(t) > 0.2: return "dup_para_char_frac"
    lines = re.split(r"\n+", t)
    e, c = dups(lines)
    if e / len(lines) > 0.3: return "dup_line_frac"
    if c / len(t) > 0.2: return "dup_line_char_frac"
    for k, f in ((2, 0.2), (3, 0.18), (4, 0.16)):
        grams = [" ".join(w[i:i + k]) for i in range(len(w) - k + 1)]
        if not grams: continue
        cnt = collections.Counter(grams)
        top = max(cnt, key=cnt.get)
        if len(top) * cnt[top] / len(t) > f: return "top_%d_gram" % k
    for k, f in ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)):
        seen, rep, i = set(), 0, 0
        while i < len(w) - k + 1:
            g = "".join(w[i:i + k])
            if g in seen: rep += len(g); i += k
            else: seen.add(g); i += 1
        if rep / len(t) > f: return "duplicated_%d_n_grams" % k
    return ""
removed, kept = collections.Counter(), []
for line in open("in.jsonl", encoding="utf-8"):
    r = json.loads(line)
    t = unicodedata.normalize("NFC", r["text"])
    t = "".join(c for c in t if c in "\t\n" or unicodedata.category(c) != "Cc")
    v = verdict(t)
    if v: removed[v] += 1
    else: r["text"] = t; kept.append(r)
ours = [json.loads(l) for l in open("gopher.jsonl", encoding="utf-8")]
rep = json.load(open("gopher.json"))
print(len(ours), "kept;", dict(removed))
sys.exit(0 if ours == kept and rep["removed"] == dict(removed) and len(removed) >= 5 else 1)
PY
expect 2 "expected N=F" -- clean --input in.jsonl --output x.jsonl --max-top-ngram-char-frac 2:0.2

cat >lang.jsonl <<'EOF'
{"text": "It was a bright cold day in April, and the clocks were striking thirteen. Winston Smith, his chin nuzzled into his breast in an effort to escape the vile wind, slipped quickly through the glass doors of Victory Mansions."}
{"text": "Es war ein heller, kalter Tag im April, und die Uhren schlugen dreizehn. Winston Smith, das Kinn an die Brust gepresst, um dem eisigen Wind zu entgehen, schlüpfte rasch durch die Glastüren."}
{"text": "C'était une journée d'avril froide et claire, et les horloges sonnaient treize heures. Winston Smith, le menton rentré dans le cou pour échapper au vent mauvais, se glissa vite par la porte vitrée."}
{"text": "qzx vbn rtp lkj mnb wqe"}
EOF
"$curate" clean --input lang.jsonl --output en.jsonl --languages en,fr --report lang.json --log-level warn
check "CLD2 names English, German and French; --languages en,fr keeps those two" $py -c "
import json
r = json.load(open('lang.json')); kept = [json.loads(l)['text'][:2] for l in open('en.jsonl')]
print(r['languages'], kept)
raise SystemExit(0 if r['languages'].get('en') == 1 and r['languages'].get('de') == 1 and r['languages'].get('fr') == 1
                 and kept == ['It', 'C\'']  and r['removed'] == {'language': 2} else 1)"

expect 2 "in.jsonl:1.*no text key" -- clean --input in.jsonl --output x.jsonl --text-key body
expect 4 "missing.jsonl" -- clean --input missing.jsonl --output x.jsonl
expect 2 "min-language-score" -- clean --input in.jsonl --output x.jsonl --min-language-score 2
check "nothing is left under the output's name after an error" [ ! -e x.jsonl ]

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
