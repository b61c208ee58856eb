#!/usr/bin/python3
"""Prints bench/run.sh's table from its JSON lines (mtnlg-bench-train, torch_train.py and
mtnlg-bench-gemm --json output, one line per run)."""
import json
import sys


def main(path):
    runs, ceiling, best, gemm_load = [], None, "", ""
    bf16 = None  # (ceiling, best, load1) of the bf16 GEMM run
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if r["impl"] == "gemm" and r.get("dtype", "f32") == "bf16":
                bf16 = (r["ceiling_gflops"], r["best"], r.get("load1", ""))
            elif r["impl"] == "gemm":
                ceiling, best, gemm_load = r["ceiling_gflops"], r["best"], r.get("load1", "")
            else:
                runs.append(r)
    prec = lambda r: r.get("precision", "fp32")
    tps = {(r["name"], prec(r), r["impl"]): r["tokens_per_s"] for r in runs}
    header = ["model", "precision", "impl", "tokens/s", "TFLOP/s", "ms/iter median (min)",
              "ratio ours/torch", "% of GEMM ceiling", "load1"]
    rows = []
    for r in runs:
        impl = "ours" if r["impl"] == "mtnlg" else "torch " + r.get("torch", "")
        if r["impl"] != "mtnlg" and prec(r) == "bf16":
            impl += " autocast"
        ratio = ""
        if r["impl"] == "mtnlg" and (r["name"], prec(r), "torch") in tps:
            ratio = f"{r['tokens_per_s'] / tps[(r['name'], prec(r), 'torch')]:.2f}x"
        # Each precision against its own GEMM ceiling: f32 rows the f32 rate, bf16 rows the bf16.
        ceil = bf16[0] if prec(r) == "bf16" and bf16 else ceiling
        share = f"{100.0 * r['tflops'] * 1e3 / ceil:.1f}%" if ceil else ""
        rows.append([r["name"], prec(r), impl.strip(), f"{r['tokens_per_s']:.1f}",
                     f"{r['tflops']:.4f}", f"{r['ms_median']:.0f} ({r['ms_min']:.0f})", ratio, share,
                     r.get("load1", "")])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    print()
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print(line(row))
    threads = {r["threads"] for r in runs}
    print(f"\nthreads: {', '.join(map(str, sorted(threads)))}; TFLOP/s from model FLOPs per token "
          "(model/gpt_flops.h, docs/planning.md: Model FLOPs)")
    if ceiling:
        print(f"GEMM ceiling: {ceiling:.1f} GFLOP/s ({best}, Backend::gemm, f32; load1 {gemm_load})")
    if bf16:
        print(f"bf16 GEMM ceiling: {bf16[0]:.1f} GFLOP/s ({bf16[1]}, Backend::gemm, bf16 x bf16 -> "
              f"f32, oneDNN; load1 {bf16[2]})")
    for r in runs:
        print(f"  {r['name']} {prec(r)} {r['impl']}: {r['flops_per_token']:.4g} FLOPs/token, "
              f"{r['tokens_per_iter']} tokens/iter, {r['iters']} timed iters, loss {r['loss']:.4f}")
    # One formula (model/gpt_flops.h): both sides must count a model alike, or the TFLOP/s
    # columns would not compare.
    counts = {}
    for r in runs:
        counts.setdefault(r["name"], set()).add(float(r["flops_per_token"]))
    for name, c in counts.items():
        if max(c) - min(c) > 1e-9 * max(c):
            print(f"ERROR: the FLOP counts of {name} differ between implementations: {sorted(c)}")
            sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: report.py RESULTS.jsonl")
    main(sys.argv[1])
