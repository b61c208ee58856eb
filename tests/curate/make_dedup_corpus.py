#!/usr/bin/env python3
"""Writes a corpus of three datasets with planted duplicates, for mtnlg-curate dedup's tests and
benchmark:

  wiki/wiki.jsonl            plain
  books/books.jsonl.gz       gzip
  cc/cc-00.jsonl, cc/cc-01.jsonl.zst

Documents are random word sequences (ASCII words and some Greek and accented ones). Planted:
exact copies (some differing only in case and whitespace, which normalization removes), near
copies with a fraction of their words replaced (about 2-15%: Jaccard of 5-gram shingles from
about 0.95 down to below the usual 0.8 threshold), placed in the same and in other datasets.
Each record is {"id", "text", "source"}; a few carry other keys, to be carried through.

Usage: make_dedup_corpus.py OUT_DIR [--docs N] [--seed S] [--mb MB]
  --docs  base documents (default 600); --mb instead: grow until the corpus is about MB megabytes
"""
import argparse
import gzip
import json
import os
import random


def words(rng, n):
    syll = ["ka", "to", "ri", "mo", "sa", "le", "nu", "pe", "di", "ga", "vo", "zi", "ch", "th",
            "an", "er", "ou", "ix"]
    base = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(n)]
    return base + ["λόγος", "ψυχή", "café", "naïve", "Straße", "ΣΟΦΙΑ"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--docs", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mb", type=float, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    vocab = words(rng, 5000)
    shards = {"wiki": [[]], "books": [[]], "cc": [[], []]}

    def doc():
        return [rng.choice(vocab) for _ in range(rng.randint(30, 400))]

    def edit(ws, frac):
        ws = list(ws)
        for i in rng.sample(range(len(ws)), max(1, int(len(ws) * frac))):
            ws[i] = rng.choice(vocab)
        return ws

    def place(text):
        name = rng.choice(["wiki", "books", "cc", "cc"])
        shard = rng.randrange(len(shards[name]))
        shards[name][shard].append(text)

    size = 0
    i = 0
    while (a.mb and size < a.mb * 1e6) or (not a.mb and i < a.docs):
        i += 1
        ws = doc()
        text = " ".join(ws)
        place(text)
        size += len(text)
        r = rng.random()
        if r < 0.15:  # exact copies, some only after normalization
            for _ in range(rng.randint(1, 3)):
                t = text if rng.random() < 0.5 else "  " + text.upper().replace(" ", " \n ") + "\t"
                place(t)
                size += len(t)
        elif r < 0.45:  # near copies, a few edits each
            for _ in range(rng.randint(1, 4)):
                t = " ".join(edit(ws, rng.choice([0.02, 0.04, 0.08, 0.15])))
                place(t)
                size += len(t)
    files = {("wiki", 0): "wiki.jsonl", ("books", 0): "books.jsonl.gz", ("cc", 0): "cc-00.jsonl",
             ("cc", 1): "cc-01.jsonl.zst"}
    n = 0
    for (name, shard), fname in files.items():
        os.makedirs(os.path.join(a.out, name), exist_ok=True)
        lines = []
        for t in shards[name][shard]:
            rec = {"id": n, "text": t, "source": name}
            if n % 7 == 0:
                rec["meta"] = {"url": "https://example.org/%d" % n, "tags": [1, 2.5, None]}
            n += 1
            lines.append(json.dumps(rec, ensure_ascii=n % 2 == 0) + "\n")
        data = "".join(lines).encode("utf-8")
        path = os.path.join(a.out, name, fname)
        if fname.endswith(".gz"):
            with gzip.open(path, "wb") as f:
                f.write(data)
        elif fname.endswith(".zst"):
            import zstandard
            with open(path, "wb") as f:
                f.write(zstandard.ZstdCompressor(level=3).compress(data))
        else:
            with open(path, "wb") as f:
                f.write(data)
    print(n, "documents,", round(size / 1e6, 1), "MB of text")


if __name__ == "__main__":
    main()
