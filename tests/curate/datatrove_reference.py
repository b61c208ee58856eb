"""DataTrove's Gopher and C4 filters and its NLTK tokenizers, written again in Python from their
definitions (DataTrove at a649de7: GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter,
utils/text.py's PUNCTUATION_SET and split_into_sentences; NLTK's word_tokenize), as the reference
of mtnlg-curate clean (tests/curate/clean_test.sh) and of its NLTK tokenizers
(tests/curate/nltk_test.sh). NLTK itself (Debian's python3-nltk) does the tokenizing; its Punkt
model comes from punkt_tab files.

  datatrove_reference.py train-punkt OUT_DIR TEXT_FILE...   # a Punkt model trained by NLTK
  datatrove_reference.py tokenize PUNKT_DIR TEXTS OUT       # as mtnlg-curate-test-nltk prints
"""
import collections
import re
import sys

# DataTrove's punctuation: its PUNCTUATION string, the control characters it appends (code
# points 0-8, 11-12, 13-31 and 127-159) and its TERMINAL_PUNCTUATION set.
_PUNCTUATION = ("!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
                + "".join(chr(x) for a, b in ((0, 9), (11, 13), (13, 32), (127, 160))
                          for x in range(a, b)))
_TERMINAL = (
    "\u0021\u002e\u003f\u0589\u061d\u061e\u061f\u06d4\u0700\u0701\u0702\u07f9\u0837\u0839"
    "\u083d\u083e\u0964\u0965\u104a\u104b\u1362\u1367\u1368\u166e\u1735\u1736\u17d4\u17d5"
    "\u17d6\u17d9\u17da\u1803\u1809\u1944\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b\u1b5e"
    "\u1b5f\u1b7d\u1b7e\u1c3b\u1c3c\u1c7e\u1c7f\u203c\u203d\u2047\u2048\u2049\u2e2e\u2e3c"
    "\u2e53\u2e54\u3002\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877\ua8ce\ua8cf\ua92f\ua9c8"
    "\ua9c9\uaa5d\uaa5e\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57\uff01\uff0e\uff1f\uff61"
    "\U00010a56\U00010a57\U00010f55\U00010f56\U00010f57\U00010f58\U00010f59\U00010f86"
    "\U00010f87\U00010f88\U00010f89\U00011047\U00011048\U000110be\U000110bf\U000110c0"
    "\U000110c1\U00011141\U00011142\U00011143\U000111c5\U000111c6\U000111cd\U000111de"
    "\U000111df\U00011238\U00011239\U0001123b\U0001123c\U000112a9\U0001144b\U0001144c"
    "\U000115c2\U000115c3\U000115c9\U000115ca\U000115cb\U000115cc\U000115cd\U000115ce"
    "\U000115cf\U000115d0\U000115d1\U000115d2\U000115d3\U000115d4\U000115d5\U000115d6"
    "\U000115d7\U00011641\U00011642\U0001173c\U0001173d\U0001173e\U00011944\U00011946"
    "\U00011a42\U00011a43\U00011a9b\U00011a9c\U00011c41\U00011c42\U00011ef7\U00011ef8"
    "\U00011f43\U00011f44\U00016a6e\U00016a6f\U00016af5\U00016b37\U00016b38\U00016b44"
    "\U00016e98\U0001bc9f\U0001da88")
PUNCTUATION_SET = set(_PUNCTUATION) | set(_TERMINAL)

STOP_WORDS = {"the", "be", "to", "of", "and", "that", "have", "with"}


def load_punkt(punkt_dir):
    """NLTK's PunktSentenceTokenizer with the model of a punkt_tab directory."""
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    def lines(name):
        with open(punkt_dir + "/" + name, encoding="utf-8") as f:
            return [l.rstrip("\n") for l in f if l.rstrip("\n")]

    p = PunktParameters()
    p.abbrev_types = set(lines("abbrev_types.txt"))
    p.sent_starters = set(lines("sent_starters.txt"))
    p.collocations = {tuple(l.split("\t")) for l in lines("collocations.tab")}
    ortho = collections.defaultdict(int)
    for l in lines("ortho_context.tab"):
        t, flags = l.rsplit("\t", 1)
        ortho[t] = int(flags)
    p.ortho_context = ortho
    return PunktSentenceTokenizer(p)


def nltk_words(punkt):
    """word_tokenize(text) with this Punkt, as DataTrove's NLTKTokenizer calls it."""
    from nltk.tokenize.destructive import NLTKWordTokenizer

    tb = NLTKWordTokenizer()
    return lambda text: [w.strip() for s in punkt.tokenize(text) for w in tb.tokenize(s) if w.strip()]


def punkt_sentence_count(punkt):
    """len(split_into_sentences(line)): Punkt's spans, one piece at least."""
    return lambda line: max(1, len(list(punkt.span_tokenize(line))))


def gopher_verdict(t, words):
    """GopherQualityFilter then GopherRepetitionFilter with Gopher's thresholds ('' if kept)."""
    w = words(t)
    n = len(w)
    counted = [x for x in w if any(c not in PUNCTUATION_SET for c in x)]
    if len(counted) < 50: return "gopher_short_doc"
    if len(counted) > 100000: return "gopher_long_doc"
    mean = sum(map(len, counted)) / len(counted)
    if mean < 3: return "gopher_below_avg_threshold"
    if mean > 10: return "gopher_above_avg_threshold"
    if t.count("#") / n > 0.1: return "gopher_too_many_hashes"
    if (t.count("...") + t.count("\u2026")) / n > 0.1: return "gopher_too_many_ellipsis"
    lines = t.splitlines()
    if sum(l.lstrip().startswith(("\u2022", "-")) for l in lines) / len(lines) > 0.9:
        return "gopher_too_many_bullets"
    if sum(l.rstrip().endswith(("...", "\u2026")) for l in lines) / len(lines) > 0.3:
        return "gopher_too_many_end_ellipsis"
    if sum(any(c.isalpha() for c in x) for x in w) / n < 0.8: return "gopher_below_alpha_threshold"
    if len(STOP_WORDS & set(w)) < 2: return "gopher_enough_stop_words"

    def dups(xs):
        seen, e, c = set(), 0, 0
        for x in xs:
            if x in seen:
                e, c = e + 1, c + len(x)
            else:
                seen.add(x)
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
        top, count = collections.Counter(grams).most_common(1)[0]
        if len(top) * count / len(t) > f: return "top_%d_gram" % k
    for k, f in ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)):
        seen, rep, i = set(), 0, 0
        while i < len(w) - k + 1:
            g = "".join(w[i:i + k])
            if g in seen:
                rep, i = rep + len(g), i + k
            else:
                seen.add(g)
                i += 1
        if rep / len(t) > f: return "duplicated_%d_n_grams" % k
    return ""


def train_punkt(out_dir, files):
    """A Punkt model trained by NLTK's PunktTrainer, written as punkt_tab files, with a few
    abbreviations and collocations added so that every rule of the tokenizer is exercised."""
    import os
    from nltk.tokenize.punkt import PunktTrainer

    os.makedirs(out_dir, exist_ok=True)
    text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in files)
    trainer = PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    trainer.train(text, finalize=True)
    p = trainer.get_params()
    p.abbrev_types |= {"dr", "mr", "mrs", "e.g", "i.e", "st", "u.s", "etc", "vs", "no", "jan"}
    p.collocations |= {("##number##", "january"), ("st.", "john")}
    p.sent_starters |= {"however", "but", "the"}

    def write(name, rows):
        with open(out_dir + "/" + name, "w", encoding="utf-8") as f:
            f.writelines(r + "\n" for r in sorted(rows))

    write("abbrev_types.txt", p.abbrev_types)
    write("sent_starters.txt", p.sent_starters)
    write("collocations.tab", (a + "\t" + b for a, b in p.collocations))
    write("ortho_context.tab", ("%s\t%d" % kv for kv in p.ortho_context.items()))
    return p


def main(argv):
    if argv[:1] == ["train-punkt"] and len(argv) >= 3:
        p = train_punkt(argv[1], argv[2:])
        print(len(p.abbrev_types), "abbreviations,", len(p.collocations), "collocations,",
              len(p.sent_starters), "sentence starters,", len(p.ortho_context), "types")
        return 0
    if argv[:1] == ["tokenize"] and len(argv) == 4:
        from nltk.tokenize.destructive import NLTKWordTokenizer

        punkt, tb = load_punkt(argv[1]), NLTKWordTokenizer()
        texts = open(argv[2], encoding="utf-8", newline="").read().split("\0")
        with open(argv[3], "w", encoding="utf-8", newline="") as f:
            for t in texts:
                f.write(" ".join(tb.tokenize(t)) + "\n")
                f.write(" ".join("%d-%d" % s for s in punkt.span_tokenize(t)) + "\n")
                f.write(" ".join(w for s in punkt.tokenize(t) for w in tb.tokenize(s)) + "\n")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
