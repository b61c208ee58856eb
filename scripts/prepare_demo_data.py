#!/usr/bin/python3
"""Tokenize text with GPT-2's byte-level BPE into a Megatron indexed dataset (.bin/.idx).

With no --input, the corpus is the King James Bible from Debian's bible-kjv package (installed
with apt-get if the `bible` program is missing), one document per chapter. Every document is
followed by the end-of-document token 50256, as Megatron's preprocess_data.py --append-eod does.

  /usr/bin/python3 scripts/prepare_demo_data.py --output-prefix data/demo/kjv_text_document
  /usr/bin/python3 scripts/prepare_demo_data.py --output-prefix out/x --input a.txt b.jsonl

An --input file ending in .jsonl holds one JSON object per line whose "text" field is a document
(Megatron's input format); any other file is one document. Outputs are written under temporary
names and renamed into place; a run whose outputs are newer than this script and its inputs does
nothing (--force rebuilds). The byte format is data/indexed_format.h's (keep the two in step).

Needs python3-regex and python3-numpy (Debian packages).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import regex

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_VOCAB_DIR = os.path.join(REPO, "data", "gpt2")
EOD = 50256  # <|endoftext|>

# data/indexed_format.h
IDX_MAGIC = b"MMIDIDX\x00\x00"
IDX_VERSION = 1
DTYPE_CODE_UINT16 = 8

# GPT-2's pre-tokenization: contractions, letter runs, digit runs, other runs, whitespace.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    """GPT-2's reversible map from the 256 byte values to printable unicode characters.

    Printable Latin-1 bytes map to themselves; the rest (controls, space, ...) to 256 + n, so
    that BPE never sees whitespace or control characters.
    """
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class GPT2Tokenizer:
    """Byte-level BPE: pre-tokenize, map bytes to unicode, merge pairs by rank (cached)."""

    def __init__(self, vocab_dir):
        with open(os.path.join(vocab_dir, "encoder.json"), encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(os.path.join(vocab_dir, "vocab.bpe"), encoding="utf-8") as f:
            merges = [tuple(line.split()) for line in f.read().split("\n")
                      if line and not line.startswith("#version")]
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()
        self.pattern = regex.compile(GPT2_PATTERN)
        self.cache = {}  # pre-token -> list of ids

    def _merge(self, word):
        """Applies the merges to a tuple of symbols, lowest rank first, until none applies."""
        symbols = list(word)
        while len(symbols) > 1:
            best, best_rank = None, None
            for pair in zip(symbols, symbols[1:]):
                rank = self.ranks.get(pair)
                if rank is not None and (best_rank is None or rank < best_rank):
                    best, best_rank = pair, rank
            if best is None:
                break
            merged = []
            i = 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == best[0] and symbols[i + 1] == best[1]:
                    merged.append(best[0] + best[1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        return symbols

    def encode(self, text):
        ids = []
        for piece in self.pattern.findall(text):
            cached = self.cache.get(piece)
            if cached is None:
                mapped = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
                cached = [self.encoder[s] for s in self._merge(mapped)]
                self.cache[piece] = cached
            ids.extend(cached)
        return ids


def write_indexed_dataset(prefix, documents):
    """Writes documents (lists of ids < 65536) as PREFIX.bin/.idx, uint16, one sequence each.

    Both files go to temporary names first; .bin is renamed into place before .idx.
    """
    lengths = np.array([len(d) for d in documents], dtype=np.int32)
    pointers = np.zeros(len(documents), dtype=np.int64)
    if len(documents) > 1:
        pointers[1:] = np.cumsum(lengths[:-1].astype(np.int64)) * 2
    doc_indices = np.arange(len(documents) + 1, dtype=np.int64)
    tokens = np.concatenate([np.asarray(d, dtype=np.int64) for d in documents]) \
        if documents else np.zeros(0, dtype=np.int64)
    if tokens.size and (tokens.min() < 0 or tokens.max() > 65535):
        raise ValueError("token ids must fit uint16")

    tag = ".tmp-%d" % os.getpid()
    bin_tmp, idx_tmp = prefix + ".bin" + tag, prefix + ".idx" + tag
    try:
        with open(bin_tmp, "wb") as f:
            f.write(tokens.astype("<u2").tobytes())
            f.flush()
            os.fsync(f.fileno())
        with open(idx_tmp, "wb") as f:
            f.write(IDX_MAGIC)
            f.write(np.array([IDX_VERSION], dtype="<u8").tobytes())
            f.write(np.array([DTYPE_CODE_UINT16], dtype="<u1").tobytes())
            f.write(np.array([len(documents), len(doc_indices)], dtype="<u8").tobytes())
            f.write(lengths.astype("<i4").tobytes())
            f.write(pointers.astype("<i8").tobytes())
            f.write(doc_indices.astype("<i8").tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(bin_tmp, prefix + ".bin")
        os.replace(idx_tmp, prefix + ".idx")
    finally:
        for path in (bin_tmp, idx_tmp):
            if os.path.exists(path):
                os.remove(path)
    return int(tokens.size)


def read_counts(prefix):
    """(documents, tokens) from an existing PREFIX.idx written by this script."""
    with open(prefix + ".idx", "rb") as f:
        header = f.read(34)
        n = int(np.frombuffer(header[18:26], dtype="<u8")[0])
        d = int(np.frombuffer(header[26:34], dtype="<u8")[0])
        lengths = np.frombuffer(f.read(4 * n), dtype="<i4")
    return d - 1, int(lengths.sum())


def kjv_chapters():
    """The King James Bible as one text per chapter, verses one per line, references dropped."""
    if shutil.which("bible") is None:
        print("prepare_demo_data: `bible` not found; running apt-get install -y bible-kjv",
              file=sys.stderr)
        if subprocess.run(["apt-get", "install", "-y", "bible-kjv"]).returncode != 0:
            sys.exit("prepare_demo_data: could not install bible-kjv; the fix: "
                     "`sudo apt-get install bible-kjv`, or pass --input FILE")
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True,
                         capture_output=True).stdout.decode("utf-8")
    # Each line is "<book><chapter>:<verse> <text>", e.g. "Ge1:1 In the beginning ...".
    verse = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")
    chapters, current, key = [], [], None
    for line in out.splitlines():
        if not line.strip():
            continue
        m = verse.match(line)
        if m is None:
            sys.exit("prepare_demo_data: unexpected line from `bible`: %r" % line)
        if (m.group(1), m.group(2)) != key and current:
            chapters.append("\n".join(current) + "\n")
            current = []
        key = (m.group(1), m.group(2))
        current.append(m.group(4).rstrip())
    if current:
        chapters.append("\n".join(current) + "\n")
    return chapters


def read_inputs(paths):
    docs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            if path.endswith(".jsonl"):
                docs.extend(json.loads(line)["text"] for line in f if line.strip())
            else:
                docs.append(f.read())
    return docs


def up_to_date(prefix, inputs):
    outputs = [prefix + ".bin", prefix + ".idx"]
    if not all(os.path.exists(p) for p in outputs):
        return False
    oldest_output = min(os.path.getmtime(p) for p in outputs)
    sources = [os.path.abspath(__file__)] + list(inputs)
    return all(os.path.getmtime(p) < oldest_output for p in sources)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-prefix", required=True,
                        help="writes PREFIX.bin and PREFIX.idx (directories are created)")
    parser.add_argument("--input", nargs="+", default=[],
                        help="text files (one document each) or .jsonl files (a 'text' field "
                             "per line); default: the King James Bible, one document per chapter")
    parser.add_argument("--vocab-dir", default=DEFAULT_VOCAB_DIR,
                        help="directory holding encoder.json and vocab.bpe")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args()

    prefix = args.output_prefix
    if not args.force and up_to_date(prefix, args.input):
        docs, tokens = read_counts(prefix)
        print("%s is up to date: %d documents, %d tokens (--force rebuilds)"
              % (prefix, docs, tokens))
        return

    start = time.time()
    texts = read_inputs(args.input) if args.input else kjv_chapters()
    tokenizer = GPT2Tokenizer(args.vocab_dir)
    documents = [tokenizer.encode(t) + [EOD] for t in texts]
    if os.path.dirname(prefix):
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
    tokens = write_indexed_dataset(prefix, documents)
    print("wrote %s.bin/.idx: %d documents, %d tokens in %.1f s"
          % (prefix, len(documents), tokens, time.time() - start))


if __name__ == "__main__":
    main()
