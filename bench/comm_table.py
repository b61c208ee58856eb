#!/usr/bin/env python3
"""Prints bench/comm_bench.sh's three tables from its output directory.

DIR/runs.txt lists one run a line: NAME TP PP DP ZERO LOAD1 TRANSPORT. For each, DIR/NAME.log holds every
rank's log (the "communication:" line mtnlg-train writes at the end of Trainer::run),
DIR/NAME.plan.json the dry-run plan (its "communication" field: bytes per rank per iteration and
group, per stage) and DIR/NAME/metrics.jsonl rank 0's metrics (elapsed_ms per iteration).
Standard library only.
"""
import json
import re
import statistics
import sys
from pathlib import Path

GROUPS = ("tensor", "pipeline", "data", "embedding")
LINE = re.compile(
    r"communication: rank (\d+) \(tp (\d+) pp (\d+) dp (\d+)\) bytes/iteration "
    r"tensor=(\S+) pipeline=(\S+) data=(\S+) embedding=(\S+) world=(\S+) total=(\S+) "
    r"over (\d+) iterations")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SKIP_ITERS = 3  # the first iterations warm caches and the allocator


def parse_ranks(log):
    ranks = {}
    for line in ANSI.sub("", log.read_text(errors="replace")).splitlines():
        m = LINE.search(line)
        if m:
            rank, tp, pp, dp = (int(x) for x in m.group(1, 2, 3, 4))
            values = [float(x) for x in m.group(5, 6, 7, 8, 9, 10)]
            ranks[rank] = dict(tp=tp, pp=pp, dp=dp, **dict(zip(GROUPS + ("world", "total"),
                                                                 values)))
    return ranks


def fmt_bytes(x):
    return f"{x:,.0f}" if x == int(x) else f"{x:,.1f}"


def rank_list(ranks):
    ranks = sorted(ranks)
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(str(r) for r in ranks)


def comm_table(out, runs):
    print("Bytes sent per rank per iteration (bus-bandwidth convention: all-reduce 2(n-1)/n S, "
          "reduce-scatter and all-gather (n-1)/n S, send S), measured by the communicators "
          "against the planner (cmd/planner.h communication_per_iteration)")
    print()
    head = ["layout (t,p,d)", "ZeRO-1", "ranks", "stage"] + list(GROUPS) + [
        "total measured", "total analytic", "ratio", "groups"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    all_exact = True
    for name, tp, pp, dp, zero, _, _ in runs:
        if not name.startswith("comm-"):
            continue
        ranks = parse_ranks(out / f"{name}.log")
        world = tp * pp * dp
        if len(ranks) != world:
            raise SystemExit(f"{name}: {len(ranks)} communication lines for {world} ranks")
        plan = json.loads((out / f"{name}.plan.json").read_text())
        analytic = {c["stage"]: c for c in plan["communication"]}
        rows = {}  # (stage, measured per group) -> ranks
        for rank, r in ranks.items():
            key = (r["pp"],) + tuple(r[g] for g in GROUPS) + (r["world"],)
            rows.setdefault(key, []).append(rank)
        for key in sorted(rows, key=lambda k: (k[0], min(rows[k]))):
            stage, measured = key[0], dict(zip(GROUPS + ("world",), key[1:]))
            want = analytic[stage]
            total = sum(measured.values())
            ratio = total / want["total"] if want["total"] else (1.0 if total == 0 else float("inf"))
            off = [f"{g} {measured[g] / want[g]:.4f}" if want[g] else f"{g} +{measured[g]:.0f}"
                   for g in GROUPS if measured[g] != want[g]]
            if measured["world"]:
                off.append(f"world +{measured['world']:.0f}")
            all_exact &= not off
            cells = [f"({tp},{pp},{dp})", "yes" if zero else "no", rank_list(rows[key]), str(stage)]
            cells += [fmt_bytes(measured[g]) for g in GROUPS]
            cells += [fmt_bytes(total), fmt_bytes(want["total"]), f"{ratio:.4f}",
                      "= exact" if not off else "; ".join(off)]
            print("| " + " | ".join(cells) + " |")
    print()
    print("groups: '= exact' when every group's measured bytes equal the analytic count; "
          "otherwise the groups that differ and their ratio.")
    return all_exact


def time_table(out, runs):
    timed = [r for r in runs if r[0].startswith("time-")]
    if not timed:
        return
    print()
    print("Time per iteration, same tiny model (4 layers, h 64, s 32, V 512), global batch 16 of "
          "micro-batches of 1, --threads 1 per rank")
    print()
    head = ["layout (t,p,d)", "transport", "ranks", "m", "median ms/iter (min)",
            "iterations timed", "load1", "predicted bubble (pp-1)/(m+pp-1)", "time / (1,1,1)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    base = None
    for name, tp, pp, dp, _, load1, transport in timed:
        lines = [json.loads(x) for x in (out / name / "metrics.jsonl").read_text().splitlines()]
        ms = [x["elapsed_ms"] for x in lines if x.get("split") == "train"][SKIP_ITERS:]
        median = statistics.median(ms)
        plan = json.loads((out / f"{name}.plan.json").read_text())
        m = plan["micro_batches"]
        if base is None:
            base = median
        bubble = f"{plan['bubble_fraction']:.4f} = {pp - 1}/{m + pp - 1}" if pp > 1 else "0"
        kind = "-" if tp * pp * dp == 1 else {"auto": "shared memory", "tcp": "TCP (ours)",
                                                 "gloo": "TCP (Gloo)"}[transport]
        print(f"| ({tp},{pp},{dp}) | {kind} | {tp * pp * dp} | {m} | {median:.1f} ({min(ms):.1f}) | "
              f"{len(ms)} | {load1} | {bubble} | {median / base:.3f} |")
    print()
    print("This machine has 2 cores shared by every rank (and by other work: load1 is the "
          "1-minute load average when the run started), so the layouts' times compare the "
          "work and communication per rank on oversubscribed cores, not scaling on separate "
          "devices. With pp stages on separate devices and equal stages, the ideal (1,2,1) time "
          "relative to (1,1,1) is (1/pp) / (1 - bubble).")


def bubble_table(out):
    path = out / "bubble_runs.txt"
    if not path.exists() or not path.read_text().strip():
        return
    print()
    print("Pipeline bubble, same tiny model: each stage's share of training time spent in its "
          "pipeline send/recv calls (waiting for its neighbours, and moving the activations), "
          "beside the planned bubble (p-1)/(v m + p-1)")
    print()
    head = ["layout (t,p,d)", "chunks v", "stage", "m", "measured in send/recv", "planned bubble",
            "ms/iter (median)", "load1"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    pat = re.compile(r"pipeline wait: stage (\d+) of (\d+) \((\d+) chunks\) ([\d.]+) ms of "
                     r"([\d.]+) ms in send/recv = ([\d.]+); planned bubble ([\d.]+)")
    for line in path.read_text().splitlines():
        name, pp, chunks, load1 = line.split()
        plan = json.loads((out / f"{name}.plan.json").read_text())
        m = plan["micro_batches"]
        lines = [json.loads(x) for x in (out / name / "metrics.jsonl").read_text().splitlines()]
        times = [x["elapsed_ms"] for x in lines if x.get("split") == "train"][SKIP_ITERS:]
        median = statistics.median(times) if times else float("nan")
        rows = sorted((int(x.group(1)), x) for x in map(pat.search, open(out / f"{name}.log"))
                      if x)
        for stage, x in rows:
            print(f"| (1,{pp},1) | {chunks} | {stage} | {m} | {float(x.group(6)):.3f} | "
                  f"{float(x.group(7)):.3f} | {median:.1f} | {load1} |")


def read_latency(out, stem):
    """{bytes: median us per call} over the rounds of one benchmark (stem.1.txt, stem.2.txt, ...),
    each a mtnlg-bench-collective or mpi_collective_ref output."""
    paths = sorted(out.glob(f"{stem}.*.txt"))
    if not paths:
        raise SystemExit(f"{out}/{stem}.*.txt: not found")
    rows = {}
    for path in paths:
        got = {}
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0].isdigit():
                got[int(parts[0])] = float(parts[1])
        if not got:
            raise SystemExit(f"{path}: no rows")
        for size, us in got.items():
            rows.setdefault(size, []).append(us)
    return {size: statistics.median(v) for size, v in rows.items()}


def collective_table(out):
    files = sorted(out.glob("coll-ours-*.*.txt"))
    if not files:
        return
    print()
    rounds = len(list(out.glob("coll-ours-all_reduce-shm.*.txt")))
    print(f"Collective latency, 2 ranks on this machine, us per call (send_recv: per one-way "
          f"transfer of a ping-pong), median of {rounds} rounds, ours against Open MPI in the same "
          "run; ratio ours / Open "
          "MPI over the same kind of transport (shared memory: ours vs Open MPI's vader; TCP: "
          "ours vs Open MPI's tcp btl)")
    print()
    head = ["op", "bytes", "ours shm", "MPI vader", "ratio shm", "ours TCP", "MPI tcp",
            "ratio TCP"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for op in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "send_recv"):
        ours = {t: read_latency(out, f"coll-ours-{op}-{t}") for t in ("shm", "tcp")}
        mpi = {t: read_latency(out, f"coll-mpi-{op}-{t}") for t in ("vader", "tcp")}
        for size in sorted(ours["shm"]):
            if size not in (1024, 16384, 131072, 1048576):
                continue
            a, b = ours["shm"][size], mpi["vader"].get(size)
            c, d = ours["tcp"].get(size), mpi["tcp"].get(size)
            cells = [op, f"{size:,}", f"{a:.1f}", f"{b:.1f}", f"{a / b:.2f}x", f"{c:.1f}",
                     f"{d:.1f}", f"{c / d:.2f}x"]
            print("| " + " | ".join(cells) + " |")


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: comm_table.py DIR (bench/comm_bench.sh's output directory)")
    out = Path(sys.argv[1])
    runs = []
    for line in (out / "runs.txt").read_text().splitlines():
        name, tp, pp, dp, zero, load1, transport = line.split()
        runs.append((name, int(tp), int(pp), int(dp), int(zero), load1, transport))
    exact = comm_table(out, runs)
    time_table(out, runs)
    bubble_table(out)
    collective_table(out)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
