#!/usr/bin/python3
"""Writes a small Megatron .bin/.idx corpus with learnable structure (token ids < VOCAB):
documents walk a fixed random successor table. Usage: make_tiny_corpus.py PREFIX [DOCS] [VOCAB]"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from prepare_demo_data import write_indexed_dataset  # noqa: E402


def main():
    prefix = sys.argv[1]
    docs = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    vocab = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    rng = random.Random(7)
    next_a = [rng.randrange(vocab) for _ in range(vocab)]
    next_b = [rng.randrange(vocab) for _ in range(vocab)]
    documents = []
    for _ in range(docs):
        t = rng.randrange(vocab)
        doc = []
        for _ in range(20 + rng.randrange(60)):
            doc.append(t)
            t = next_b[t] if rng.randrange(4) == 0 else next_a[t]
        documents.append(doc)
    write_indexed_dataset(prefix, documents)


if __name__ == "__main__":
    main()
