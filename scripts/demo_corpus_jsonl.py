#!/usr/bin/python3
"""Writes the demo corpus as JSON lines for mtnlg-preprocess: the King James Bible (Debian's
bible-kjv, one document per chapter) and the fortune cookie collection (Debian's fortunes, one
document per fortune).

Usage: demo_corpus_jsonl.py OUT_DIR   -> OUT_DIR/kjv.jsonl, OUT_DIR/fortunes.jsonl
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prepare_demo_data import kjv_chapters  # noqa: E402  (one text per chapter)

FORTUNES_DIR = "/usr/share/games/fortunes"


def fortunes():
    """Every fortune of the collection's plain-text files (entries end at a line '%')."""
    files = sorted(p for p in glob.glob(os.path.join(FORTUNES_DIR, "*"))
                   if os.path.isfile(p) and "." not in os.path.basename(p))
    if not files:
        sys.exit("demo_corpus_jsonl: no fortunes in %s; the fix: apt-get install fortunes"
                 % FORTUNES_DIR)
    out = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            entry = []
            for line in f:
                if line.rstrip("\n") == "%":
                    if entry:
                        out.append("".join(entry))
                    entry = []
                else:
                    entry.append(line)
            if entry:
                out.append("".join(entry))
    return out


def write_jsonl(path, docs):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    os.replace(tmp, path)
    print("demo_corpus_jsonl: %s: %d documents" % (path, len(docs)))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write_jsonl(os.path.join(out, "kjv.jsonl"), kjv_chapters())
    write_jsonl(os.path.join(out, "fortunes.jsonl"), fortunes())


if __name__ == "__main__":
    main()
