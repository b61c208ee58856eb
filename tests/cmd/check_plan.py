#!/usr/bin/python3
"""Checks a run against its plan (mtnlg-train --dry-run --json).

Usage: check_plan.py RUN_DIR [--log LOG --ranks N]
RUN_DIR holds plan.json and metrics.jsonl: rank 0's comm_bytes must equal the plan's count for
stage 0 ("communication"[0]["total"]) at every training iteration, exactly. With --log, every one
of the N ranks must have logged "memory after the first iteration: ... (..; MEASURED B, PLANNED B)"
with the two equal. Prints what it compared; exits 1 on any difference.
"""
import argparse
import json
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--log")
    ap.add_argument("--ranks", type=int, default=0)
    a = ap.parse_args()
    plan = json.load(open(f"{a.run_dir}/plan.json"))
    want = plan["communication"][0]["total"]
    got = [json.loads(l)["comm_bytes"] for l in open(f"{a.run_dir}/metrics.jsonl") if '"train"' in l]
    print(f"{a.run_dir}: comm_bytes {got[0] if got else None} per iteration, planned {want}; "
          f"planned bubble {plan['bubble_fraction']:.4f}")
    ok = bool(got) and all(g == want for g in got)
    if a.log:
        pat = re.compile(r"\[rank (\d+)\].*memory after the first iteration: .*; (\d+) B, (\d+) B\)")
        peaks = {}
        for line in open(a.log):
            m = pat.search(line)
            if m:
                peaks[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
        for rank, (measured, planned) in sorted(peaks.items()):
            if measured != planned:
                print(f"  rank {rank}: peak {measured} B measured, {planned} B planned")
        if len(peaks) != a.ranks:
            print(f"  {len(peaks)} of {a.ranks} ranks logged their memory")
        ok = ok and len(peaks) == a.ranks and all(x == y for x, y in peaks.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
