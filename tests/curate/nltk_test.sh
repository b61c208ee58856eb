#!/usr/bin/env bash
# NLTK's English tokenizers as mtnlg-curate has them (data/curate/nltk_tokenize.h) against NLTK
# itself (Debian's python3-nltk; tests/curate/datatrove_reference.py tokenize): NLTKWordTokenizer's
# tokens, Punkt's sentence spans and word_tokenize's tokens, text for text, with a Punkt model
# NLTK's PunktTrainer learns here from fortunes (abbreviations, collocations, sentence starters,
# orthographic contexts; NLTK's own English model is not in Debian) and with an empty one; on every
# fortune, KJV chapters, and generated texts of quotes, brackets, abbreviations, initials, numbers,
# ellipses, contractions and Unicode cases. Bad model files are named.
# Usage: tests/curate/nltk_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
# shellcheck source=tests/curate/curate_lib.sh
source "$2/tests/curate/curate_lib.sh"
curate_setup "$1" "$2"
tool=$build/mtnlg-curate-test-nltk
dt=$src/tests/curate/datatrove_reference.py

$py -c "import nltk" || { echo "FAIL: python3-nltk is missing (scripts/setup.sh installs it)"; exit 1; }
fortunes=/usr/share/games/fortunes
$py "$dt" train-punkt model "$fortunes/computers" "$fortunes/literature" "$fortunes/people" \
  "$fortunes/politics" || exit 1
mkdir -p empty && touch empty/abbrev_types.txt empty/sent_starters.txt empty/collocations.tab \
  empty/ortho_context.tab
$py "$src/scripts/demo_corpus_jsonl.py" raw >/dev/null || exit 1
$py - "$fortunes" <<'PY'
import glob, json, random, sys
rng = random.Random(7)
docs = []
for f in sorted(glob.glob(sys.argv[1] + "/*")):
    if f.endswith((".dat", ".u8")) or "/off" in f: continue
    try: docs += open(f, encoding="utf-8", errors="replace").read().split("\n%\n")
    except IsADirectoryError: pass
docs += [json.loads(l)["text"] for l in open("raw/kjv.jsonl")][:300]
docs += ['Good muffins cost $3.88\nin New York.  Please buy me\ntwo of them.\nThanks.',
         "Mr. Smith met Dr. Jones at 5 p.m. on Jan. 3. They talked. U.S. policy e.g. tariffs.",
         "He said \"hello.\" Then (quietly) left... She didn't. 'Tis so. Cannot gimme lemme.",
         "", "   ", ".", "?!", "x" * 60 + ". Yes."]
pieces = ["Mr.", "Dr.", "e.g.", "U.S.", "J.", "3.", "12.5", "-4", ".5", "...", "..", ". .", ". . .",
  "--", "---", '"', "''", "``", "'", "\u2019", "\u201c", "\u201d", "\u00ab", "\u00bb", "(", ")", "[",
  "]", "{", "}", "<", ">", "?", "!", ";", ":", ",", "can't", "I'm", "they'll", "'tis", "gonna",
  "wanna", "cannot", "Hello", "world", "the", "The", "However", "A", "a", "\u0130", "\u03a3",
  "\u01c5", "\u216b", "caf\u00e9", "na\u00efve", "\u00a0", "\u2009", "\t", "\n", "\n\n", " ", "  ",
  "\r\n", "x", "#", "$", "%", "&", "@", "*", "_", "1,000", "3:30", "a:b", "a,b", "end.", "End.\"",
  "end.)", "end.]", "e.g.,", "i.e.", "vs.", "St.", "John", "January", "\U0001d400.", "\u0661.",
  # Python's IGNORECASE: 'i' also matches 'İ' and 'ı', 's' also 'ſ' (the contractions' classes)
  "'t\u0131s", "'T\u0130S", "g\u0131mme", "G\u0130MME", "'t\u017f", "'\u017f"]
for _ in range(3000):
    docs.append("".join(rng.choice(pieces) + rng.choice(["", " ", " ", " ", "\n"])
                        for _ in range(rng.randint(1, 40))))
open("texts", "w", encoding="utf-8", newline="").write("\0".join(d.replace("\0", "") for d in docs))
print(len(docs), "texts")
PY
for m in model empty; do
  "$tool" $m texts >ours-$m.txt
  $py "$dt" tokenize $m texts ref-$m.txt
  check "$m model: every text's treebank tokens, Punkt spans and word_tokenize equal NLTK's" \
    cmp ours-$m.txt ref-$m.txt
done
check "the trained model breaks differently from the empty one (its parameters are read)" \
  bash -c '! cmp -s ours-model.txt ours-empty.txt'

# A bad model is named through mtnlg-curate clean --punkt-dir.
printf '{"text": "One. Two."}\n' >one.jsonl
cp -r model bad && printf 'a\tb\tc\n' >>bad/collocations.tab
expect 4 "bad/collocations.tab.*line [0-9]+.*two types" -- clean --input one.jsonl --output x.jsonl \
  --c4 --punkt-dir bad
cp -r model bad2 && printf 'word\tx7\n' >>bad2/ortho_context.tab
expect 4 "bad2/ortho_context.tab.*line [0-9]+.*flags" -- clean --input one.jsonl --output x.jsonl \
  --gopher --punkt-dir bad2
cp -r model bad3 && rm bad3/sent_starters.txt
expect 4 "bad3/sent_starters.txt.*punkt_tab" -- clean --input one.jsonl --output x.jsonl --c4 \
  --punkt-dir bad3
check "nothing is left under the output's name after an error" [ ! -e x.jsonl ]

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
