#!/usr/bin/python3
"""Cross-checks data/numpy_random.h against the installed numpy's RandomState, live: random
seeds and lengths (up to 300,000), the shuffled arrays compared whole. Usage: numpy_random_check.py
TOOL, where TOOL prints a shuffled arange: `TOOL SEED N` (tests/data/numpy_shuffle_tool.cc)."""
import subprocess
import sys

import numpy as np

tool = sys.argv[1]
rng = np.random.default_rng(2024)
cases = [(0, 1), (1, 7), (2**32 - 1, 1000)] + [
    (int(rng.integers(0, 2**32)), int(rng.integers(1, 300_000))) for _ in range(12)]
bad = 0
for seed, n in cases:
    want = np.arange(n, dtype=np.int64)
    np.random.RandomState(seed).shuffle(want)
    out = subprocess.run([tool, str(seed), str(n)], check=True, capture_output=True, text=True)
    got = np.array(out.stdout.split(), dtype=np.int64)
    if got.shape != want.shape or not np.array_equal(got, want):
        bad += 1
        print(f"FAIL seed {seed} n {n}: differs from numpy {np.__version__}")
print(f"{len(cases) - bad} of {len(cases)} shuffles equal numpy {np.__version__}'s RandomState")
sys.exit(1 if bad else 0)
