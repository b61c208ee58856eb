#!/usr/bin/python3
"""Checks tests/data/fixtures/gpt2_tokenizer_cases.jsonl against GPT-2's own algorithm.

The fixture's ids come from the npm package gpt-3-encoder (tests/data/make_tokenizer_fixtures.js);
the ground truth is GPT-2's encoder.py with the Python `regex` module, which
scripts/prepare_demo_data.py implements. A case whose "ids" differ from Python's fails; a case
where JavaScript's classes differ from Python's carries Python's ids, marked "js_ids_differ": true
(see the generator). Exit status 0 when every case agrees.

  /usr/bin/python3 tests/data/check_tokenizer_fixtures.py [--fix]

--fix rewrites "ids" with Python's ids where they differ, and marks those lines.
Needs python3-regex (Debian package).
"""

import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
from prepare_demo_data import GPT2Tokenizer  # noqa: E402

FIXTURE = os.path.join(REPO, "tests", "data", "fixtures", "gpt2_tokenizer_cases.jsonl")


def main():
    fix = "--fix" in sys.argv[1:]
    tokenizer = GPT2Tokenizer(os.path.join(REPO, "data", "gpt2"))
    with open(FIXTURE, encoding="utf-8") as f:
        cases = [json.loads(line) for line in f if line.strip()]
    bad = 0
    for case in cases:
        if "hex" in case:
            text = bytes.fromhex(case["hex"]).decode("utf-8", errors="replace")
        else:
            text = case["text"]
        want = tokenizer.encode(text)
        if case["ids"] != want:
            bad += 1
            print("%s: Python gives %d ids, fixture has %d (first difference at %d)"
                  % (case["name"], len(want), len(case["ids"]),
                     next((i for i, (a, b) in enumerate(zip(want, case["ids"])) if a != b),
                          min(len(want), len(case["ids"])))))
            if fix:
                case["ids"] = want
                case["js_ids_differ"] = True
    if fix and bad:
        with open(FIXTURE, "w", encoding="utf-8") as f:
            for case in cases:
                f.write(json.dumps(case, ensure_ascii=False, separators=(",", ":")) + "\n")
        print("rewrote %s with Python's ids" % FIXTURE)
        bad = 0
    print("%d cases, %d disagree with GPT-2's Python encoder" % (len(cases), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
