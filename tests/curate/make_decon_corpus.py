#!/usr/bin/env python3
"""Writes a training shard with planted downstream-task passages, and the task files, for
mtnlg-curate decontaminate's tests and benchmark:

  OUT/train.jsonl        documents of sentences ('.', '!', '?'), some holding task passages:
                         in the middle, near either end, several in one document, more than 10
                         in one, one passage in 12 documents (a common phrase: not removed),
                         inside documents of fewer than 13 words (never checked); with 'İ'
                         (its lower case is longer: positions drift as in the script), Greek,
                         digits and '_' words; some records carry a split_id and other members
  OUT/lambada.jsonl      {"text": ...} passages of 9 to 60 words
  OUT/piqa.jsonl         {"goal": ..., "sol1": ...} goals of 8 to 15 words

With --edges every document holds several passages whose words are joined by other separators
(two spaces, commas, newlines, dashes: the script's cut then lands inside the passage or inside
a word), next to 'İ' (the positions drift) and capital sigmas that are final in the whole text
but not in the tail a cut leaves ('.Σ' right after a passage).

Usage: make_decon_corpus.py OUT [--docs N] [--seed S] [--mb MB] [--edges]
"""
import argparse
import json
import os
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--docs", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mb", type=float, default=0)
    ap.add_argument("--edges", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(4000)] + ["İstanbul", "ΣΟΦΙΑ", "naïve", "x_1", "2024", "Ⅻ", "déjà"]

    def sentence(n=None):
        ws = [rng.choice(vocab) for _ in range(n or rng.randint(4, 25))]
        ws[0] = ws[0].capitalize()
        return " ".join(ws) + rng.choice([".", ".", ".", "!", "?", ","])

    lambada = [" ".join(rng.choice(vocab) for _ in range(rng.randint(9, 60))) for _ in range(60)]
    piqa = [" ".join(rng.choice(vocab) for _ in range(rng.randint(8, 15))) for _ in range(40)]
    if a.edges:  # a 12-word passage whose first word is a lone capital sigma (lower case 'σ')
        lambada.append("\u03a3 " + " ".join(rng.choice(vocab[:4000]) for _ in range(11)))
        sigma_rest = lambada[-1].split(" ", 1)[1]
        short = [p for p in lambada + piqa if len(p.split()) <= 12]
    passages = lambada + piqa
    common = lambada[0]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "lambada.jsonl"), "w") as f:
        for t in lambada:
            f.write(json.dumps({"text": t}) + "\n")
        f.write(json.dumps({"text": "too short to count"}) + "\n")
    with open(os.path.join(a.out, "piqa.jsonl"), "w") as f:
        for t in piqa:
            f.write(json.dumps({"goal": t, "sol1": "a solution", "label": 0}) + "\n")

    def passage_variant(p):
        # Case and punctuation differ; the words match.
        ws = p.split()
        return " ".join(w.upper() if rng.random() < 0.2 else w for w in ws)

    size, n = 0, 0
    with open(os.path.join(a.out, "train.jsonl"), "w") as f:
        while (a.mb and size < a.mb * 1e6) or (not a.mb and n < a.docs):
            n += 1
            kind = rng.random()
            parts = [sentence() for _ in range(rng.randint(3, 40))]
            if a.edges:
                if rng.random() < 0.5:
                    for _ in range(rng.randint(1, 2)):
                        sep = rng.choice([" ", " ", "  ", ", ", "\n", " \u2014 ", "..."])
                        p = (rng.choice(["", "", "\u0130", "\u039f\u03a3 ", "\u039b\u039f\u0393\u039f\u03a3. "])
                             + sep.join(rng.choice(passages).split())
                             + rng.choice(["", ".", ".\u03a3", "'\u03a3", "\u03a3", " \u039f\u03a3", "\u0130"]))
                        parts.insert(rng.randrange(len(parts) + 1), p)
                if rng.random() < 0.15:
                    # A passage, 200 characters without a sentence end, then '.Σ' and the sigma
                    # passage's other words: cleaning cuts after that '.', so the next text starts
                    # with the 'Σ', which is final in the whole text ('ς': no hit there) but not
                    # in that text ('σ': a hit), as the script lower-cases each text anew.
                    filler = " ".join(rng.choice(vocab[:4000]) for _ in range(45))
                    parts.insert(rng.randrange(len(parts) + 1),
                                 rng.choice(short) + " " + filler + ".\u03a3 " + sigma_rest + ".")
                if rng.random() < 0.2:
                    # Sixty 'İ' between two passages: the second one's position in the lowered
                    # text is 60 code points past the text's, which the script uses as is.
                    filler = " ".join(rng.choice(vocab[:4000]) for _ in range(30))
                    parts.insert(rng.randrange(len(parts) + 1),
                                 rng.choice(short) + " " + "\u0130\u0130\u0130\u0130 " * 15 + filler + ". "
                                 + " ".join(sentence(8) for _ in range(4)) + " " + rng.choice(short) + ".")
                kind = 1.0
            if kind < 0.25:  # one passage somewhere
                parts.insert(rng.randrange(len(parts) + 1), passage_variant(rng.choice(passages)))
            elif kind < 0.32:  # several
                for _ in range(rng.randint(2, 5)):
                    parts.insert(rng.randrange(len(parts) + 1), rng.choice(passages) + ".")
            elif kind < 0.34:  # more than 10 hits
                parts = []
                for _ in range(14):
                    parts += [sentence(40) for _ in range(5)] + [rng.choice(passages) + "."]
            elif kind < 0.37:  # near the start or the end
                p = rng.choice(passages)
                parts = [p] + parts if rng.random() < 0.5 else parts + [p]
            elif kind < 0.40:  # the common passage: in many documents, kept
                parts.insert(rng.randrange(len(parts) + 1), common + ".")
            elif kind < 0.42:  # a document of fewer than 13 words holding 8-12 task words
                parts = [rng.choice(piqa)]
            text = " ".join(parts)
            rec = {"text": text, "id": n}
            if n % 5 == 0:
                rec = {"url": "https://example.org/%d" % n, "text": text, "score": 0.5}
            if n % 11 == 0:
                rec["split_id"] = "old-%d" % n
            f.write(json.dumps(rec, ensure_ascii=n % 2 == 0) + "\n")
            size += len(text)
    print(n, "documents,", round(size / 1e6, 1), "MB of text")


if __name__ == "__main__":
    main()
