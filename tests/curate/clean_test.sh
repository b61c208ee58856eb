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
# Planted for the Gopher rules as DataTrove has them now: dash bullets, one stop word repeated,
# words that are punctuation alone (not counted as words).
docs += ["\n".join("- item %d of the list, with the words that make a line of it" % i for i in range(12)),
         " ".join("the word%d" % i for i in range(60)),
         " \u2014 ".join("and the word%d" % i for i in range(10)) + " -" * 30]
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

# The Gopher rules against DataTrove's filters written again (tests/curate/datatrove_reference.py):
# whitespace words, and NLTK's words (word_tokenize with a Punkt model NLTK trains here).
$py "$src/tests/curate/datatrove_reference.py" train-punkt punkt /usr/share/games/fortunes/literature \
  /usr/share/games/fortunes/people >/dev/null || exit 1
"$curate" clean --input in.jsonl --output gopher.jsonl --report gopher.json --gopher --log-level warn
"$curate" clean --input in.jsonl --output gopher-nltk.jsonl --report gopher-nltk.json --gopher \
  --punkt-dir punkt --threads 2 --log-level warn
for words in split nltk; do
  out=gopher.jsonl rep=gopher.json
  [[ $words == nltk ]] && out=gopher-nltk.jsonl rep=gopher-nltk.json
  check "--gopher ($words words): the kept records and the count of every rule equal DataTrove's" \
    $py - "$src" $words $out $rep <<'PY'
import collections, json, sys, unicodedata
sys.path.insert(0, sys.argv[1] + "/tests/curate")
import datatrove_reference as dt
words = str.split if sys.argv[2] == "split" else dt.nltk_words(dt.load_punkt("punkt"))
removed, kept = collections.Counter(), []
for line in open("in.jsonl", encoding="utf-8"):
    r = json.loads(line)
    t = unicodedata.normalize("NFC", r["text"])
    t = "".join(c for c in t if c in "\t\n" or unicodedata.category(c) != "Cc")
    v = dt.gopher_verdict(t, words)
    if v: removed[v] += 1
    else: r["text"] = t; kept.append(r)
ours = [json.loads(l) for l in open(sys.argv[3], encoding="utf-8")]
rep = json.load(open(sys.argv[4]))
print(len(ours), "kept;", dict(removed))
sys.exit(0 if ours == kept and rep["removed"] == dict(removed) and len(removed) >= 5 else 1)
PY
done
check "NLTK's words and whitespace words remove different documents" bash -c '! cmp -s gopher.json gopher-nltk.json'

# The C4 rules (DataTrove's C4QualityFilter, written again here from its definition) on the same
# corpus and on documents planted for each rule.
$py - <<'PY'
import json
long_word = "x" * 1001
docs = [
    "The war began in 1914.[1] It ended in 1918.[2][3] Many people died in it.\n"
    "Historians still argue about it.[citation needed] Some say it was avoidable. [edit]\n"
    "A third line says more. It has \u201cquotes.\u201d And (brackets.) Then 3 numbers.",
    "This page uses cookies to help you.\nPlease enable JavaScript in your browser now.\n"
    "Our privacy policy changed last week. Read it carefully.\n" + "A good line is here. " * 3 + "\n"
    "Another good line has words. It is fine! Is it? Yes.",
    "Some filler text here that ends well.\nLorem ipsum dolor sit amet, consectetur.\n" + "Ok. " * 6,
    "One line is fine here. Two sentences.\nfunction f() { return 1; } is code.\nMore text. More.",
    "A line with a very long word " + long_word + " ends here.\n" + "Short line. " * 6,
    "Trailing ellipsis lines...\nWhat about this one...\nDr. Smith met Mr. Jones. They talked.",
    "too few words.\nTwo words.\n" + "Enough words here now. " * 5,
    "\u0130stanbul is a city. \u00c9t\u00e9 comes. \u0661\u0662 is a number. \u2028"
    "A line after a separator. It counts. It does. Yes it does.",
]
with open("c4.jsonl", "w") as f:
    for i, t in enumerate(docs):
        f.write(json.dumps({"id": 10000 + i, "text": t}) + "\n")
    for line in open("in.jsonl"):
        f.write(line)
PY
"$curate" clean --input c4.jsonl --output c4-out.jsonl --report c4-rep.json --c4 --threads 2 \
  --log-level warn
"$curate" clean --input c4.jsonl --output c4-one.jsonl --c4 --threads 1 --log-level warn
"$curate" clean --input c4.jsonl --output c4-punkt.jsonl --report c4-punkt.json --c4 \
  --punkt-dir punkt --threads 2 --log-level warn
check "--c4: 1 and 2 threads write the same bytes" cmp -s c4-out.jsonl c4-one.jsonl
for sentences in rule punkt; do
out=c4-out.jsonl rep=c4-rep.json
[[ $sentences == punkt ]] && out=c4-punkt.jsonl rep=c4-punkt.json
check "--c4 ($sentences sentences): kept texts, removed documents and dropped lines equal the Python reference's" \
  $py - "$src" $sentences $out $rep <<'PY'
import collections, json, re, sys, unicodedata
sys.path.insert(0, sys.argv[1] + "/tests/curate")
import datatrove_reference as dt
CIT = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
POLICY = ["terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
          "use cookies"]
OPEN, CLOSE = "\"'([\u201c\u2018", "\"')]\u201d\u2019"
def sentences(line):
    n, last = 0, None
    for m in re.finditer("[.!?]+[" + re.escape(CLOSE) + "]*", line):
        rest = line[m.end():]
        ws = len(rest) - len(rest.lstrip())
        if ws and ws < len(rest):
            c = rest[ws]
            if c.isupper() or unicodedata.category(c) == "Nd" or c in OPEN:
                n, last = n + 1, m.end()
    tail = line if last is None else line[last:]
    return n + (1 if tail.strip() else 0)
def c4(text, lines):
    kept, count = [], 0
    for line in text.splitlines():
        line = line.strip()
        words = line.split()
        if any(len(w) > 1000 for w in words):
            lines["c4_too_long_word"] += 1; continue
        line = CIT.sub("", line)
        if not line.endswith((".", "?", "!", '"', "'")) or line.endswith("..."):
            lines["c4_no_terminal_punct"] += 1; continue
        if len(words) < 3:
            lines["c4_too_few_words"] += 1; continue
        low = line.lower()
        if "lorem ipsum" in low: return "c4_lorem_ipsum", None
        if "javascript" in low:
            lines["c4_javascript"] += 1; continue
        if "{" in line: return "c4_curly_bracket", None
        if any(p in low for p in POLICY):
            lines["c4_policy"] += 1; continue
        count += count_sentences(line)
        kept.append(line)
        lines["c4_lines_kept"] += 1
    if count < 5: return "c4_too_few_sentences", None
    return "", "\n".join(kept).strip()
count_sentences = sentences if sys.argv[2] == "rule" else dt.punkt_sentence_count(dt.load_punkt("punkt"))
removed, lines, kept = collections.Counter(), collections.Counter(), []
for raw in open("c4.jsonl", encoding="utf-8"):
    r = json.loads(raw)
    t = unicodedata.normalize("NFC", r["text"])
    t = "".join(c for c in t if c in "\t\n" or unicodedata.category(c) != "Cc")
    doc_lines = collections.Counter()
    why, text = c4(t, doc_lines)
    lines += doc_lines
    if why: removed[why] += 1
    else: r["text"] = text; kept.append(r)
ours = [json.loads(l) for l in open(sys.argv[3], encoding="utf-8")]
rep = json.load(open(sys.argv[4]))
print(len(ours), "kept;", dict(removed), dict(lines))
mine = {r["id"]: r["text"] for r in ours}
planted = {i: mine.get(i) for i in range(10000, 10008)}
print(json.dumps(planted, ensure_ascii=False)[:900])
ok = ours == kept and rep["removed"] == dict(removed) and rep["c4_lines"] == dict(lines)
ok &= all(removed[k] > 0 for k in ("c4_lorem_ipsum", "c4_curly_bracket", "c4_too_few_sentences"))
ok &= all(lines[k] > 0 for k in ("c4_too_long_word", "c4_no_terminal_punct", "c4_too_few_words",
                                 "c4_javascript", "c4_policy"))
# The citations are cut from the first planted document's kept lines.
ok &= mine.get(10000, "").startswith("The war began in 1914. It ended in 1918. Many")
sys.exit(0 if ok else 1)
PY
done
check "Punkt's sentences and the rule's remove different documents" bash -c '! cmp -s c4-rep.json c4-punkt.json'
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
