#!/usr/bin/env python3
"""Summaries for scripts/gpu/check.sh.

  report.py demo METRICS.jsonl          first and last train loss, median tokens/s, peak memory;
                                        exits 1 unless the loss fell by at least 2 nats
  report.py train-row NAME PRECISION METRICS.jsonl
      one benchmark line (JSON, as mtnlg-bench-train --json writes) from an mtnlg-train metrics
      file: median tokens/s, TFLOP/s and ms over the train iterations after the first two (the
      cuBLASLt algorithm choice and the allocator's first growth), the most peak memory, the
      last loss; exits 1 when there are fewer than three train iterations
  report.py bench RESULTS.jsonl OUT.json
      the benchmark table from mtnlg-bench-gemm / mtnlg-bench-train / torch_train.py / plan
      JSON lines: per model and implementation tokens/s, model TFLOP/s, MFU as the field
      states it (against the GPU's datasheet dense peak, core/device_peak.h: the peak_tflops
      mtnlg-bench-train and the metrics report; one GPU per kit run, so PyTorch's rows take
      the same), the share of the bf16 GEMM rate measured in the same run (the best shape of
      mtnlg-bench-gemm), ours/torch ratio, peak memory (and the planner's figure for ours),
      and what the process held on the GPU outside the caching allocator (the CUDA context,
      library buffers); then the goals: the best of the 1.3B recipe's end-to-end rows (55%
      MFU; 50% of the GEMM rate, the earlier goal), GPT-2 124M (40%) and the 530B layer slice
      (50%, beside the paper's 126 TFLOP/s per A100). Text on stdout, JSON to OUT.json.
  report.py attention RESULTS.jsonl OUT.json
      the attention table from mtnlg-bench-attention / torch_attention.py JSON lines: per shape
      and dropout each implementation's forward and backward ms and TFLOP/s (FlashAttention's
      count), and PyTorch's time over ours (> 1: ours is faster) for forward, backward and both;
      then per shape and dropout our fastest forward and fastest backward and the settings that
      combine them (MTNLG_CUDA_ATTENTION, MTNLG_CUDA_FLASH2_ROWS, MTNLG_CUDA_FLASH2_DQ). Text on
      stdout, JSON to OUT.json ("best").
  report.py attention-choice ATTENTION.json SHAPE DROPOUT
      those settings for one shape and dropout as NAME=VALUE words, the ones that matter to the
      kernels chosen; nothing when they are the defaults of blocked or of flash2 (the kit's
      other end-to-end rows); exit 1 when ATTENTION.json has no such entry.
"""
import json
import statistics
import sys


def demo(path):
    rows = [json.loads(line) for line in open(path) if '"split": "train"' in line]
    if not rows:
        print(f"report.py: no train lines in {path}")
        return 1
    tps = statistics.median(r["tokens_per_sec"] for r in rows[1:] or rows)
    first, last = rows[0]["loss"], rows[-1]["loss"]
    peak = max(r.get("peak_memory_bytes", 0) for r in rows)
    print(f"demo on the GPU (bf16): {len(rows)} iterations, loss {first:.3f} -> {last:.3f}, "
          f"median {tps:,.0f} tokens/s, peak {peak / 2**20:.0f} MiB")
    return 0 if last < first - 2.0 else 1


def train_row(name, precision, path):
    rows = [json.loads(line) for line in open(path) if '"split": "train"' in line]
    if len(rows) < 3:
        print(f"report.py: {path} has {len(rows)} train iterations; train-row needs 3 or more",
              file=sys.stderr)
        return 1
    timed = rows[2:]
    print(json.dumps({
        "impl": "mtnlg", "name": name, "precision": precision, "source": "mtnlg-train",
        "iterations": len(timed),
        "tokens_per_s": statistics.median(r["tokens_per_sec"] for r in timed),
        "tflops": statistics.median(r["tflops_per_device"] for r in timed),
        "ms_median": statistics.median(r["elapsed_ms"] for r in timed),
        "peak_memory_bytes": max(r.get("peak_memory_bytes", 0) for r in rows),
        "loss": rows[-1]["loss"],
        # The metrics' mfu is against the datasheet peak the trainer looked up for this GPU.
        "mfu": (statistics.median(r["mfu"] for r in timed) if all("mfu" in r for r in timed)
                else None),
        "peak_tflops": (statistics.median(r["tflops_per_device"] / r["mfu"] for r in timed)
                        if all(r.get("mfu") for r in timed) else None),
    }))
    return 0


def bench(path, out_path):
    lines = [json.loads(line) for line in open(path) if line.strip()]
    gemm = [r for r in lines if r.get("impl") == "gemm"]
    ceiling = max(r["ceiling_gflops"] for r in gemm) / 1e3 if gemm else float("nan")
    plans = {r["name"]: r["memory_bytes"] for r in lines if r.get("impl") == "plan"}
    runs = [r for r in lines if r.get("impl") in ("mtnlg", "torch")]
    # The datasheet peak of this run's GPU, as our binaries looked it up (one GPU per kit run).
    peaks = [r["peak_tflops"] for r in runs if r.get("peak_tflops")]
    peak = peaks[0] if peaks else None
    table = []
    for r in runs:
        torch = next((t for t in runs if t["impl"] == "torch" and t["name"] == r["name"]
                      and t["precision"] == r["precision"]), None)
        row = {
            "model": r["name"], "impl": r["impl"], "precision": r["precision"],
            "tokens_per_s": r["tokens_per_s"], "tflops": r["tflops"],
            "mfu": r["tflops"] / peak if peak else None,
            "mfu_vs_gemm": r["tflops"] / ceiling, "ms_median": r["ms_median"],
            "attention": r.get("attention"), "tensor_slice": r.get("tensor_slice", 1),
            "ratio_vs_torch": r["tokens_per_s"] / torch["tokens_per_s"] if torch else None,
            "peak_memory_bytes": r.get("peak_memory_bytes", 0),
            "plan_memory_bytes": plans.get(r["name"]) if r["impl"] == "mtnlg" else None,
            "loss": r["loss"],
            # What the process holds on the GPU beyond the caching allocator's reservation: the
            # CUDA context and library buffers (the plan's DeviceOverheads estimate them).
            "outside_allocator_bytes": (r["device_bytes_in_use"] - r["reserved_bytes"]
                                        if r.get("device_bytes_in_use") else None),
            # The host's waits for the GPU an iteration (mtnlg-bench-train without --profile):
            # what a CUDA graph of the step needs to be none inside it.
            "host_waits_per_iter": r.get("host_waits_per_iter"),
            # The launches of a micro-batch's forward and backward (its CUDA graph's nodes),
            # which row *-graph replays as one.
            "launches_per_micro_batch": r.get("launches_per_micro_batch"),
            # The optimizer step's launches (gradient norm, clip, AdamW) that a *-graph row
            # replays as one (null elsewhere).
            "optimizer_launches": r.get("optimizer_launches"),
        }
        table.append(row)
    print(f"bf16 GEMM rate measured (best model shape, cuBLAS): {ceiling:.1f} TFLOP/s; "
          f"MFU against the datasheet dense bf16 peak: "
          f"{f'{peak:g} TFLOP/s' if peak else 'unknown for this GPU'}")
    print(f"{'model':<18} {'impl':<6} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'of GEMM':>7} "
          f"{'ours/torch':>10} {'peak GiB':>9} {'plan GiB':>9} {'ms/iter':>8} {'waits/iter':>10} "
          f"{'launches/mb':>11} {'opt launches':>12} {'outside GiB':>11}")
    for t in table:
        ratio = f"{t['ratio_vs_torch']:.2f}x" if t["impl"] == "mtnlg" and t["ratio_vs_torch"] else ""
        plan = f"{t['plan_memory_bytes'] / 2**30:.2f}" if t["plan_memory_bytes"] else ""
        outside = (f"{t['outside_allocator_bytes'] / 2**30:.2f}"
                   if t["outside_allocator_bytes"] is not None else "")
        mfu = f"{100 * t['mfu']:>5.1f}%" if t["mfu"] is not None else f"{'':>6}"
        waits = f"{t['host_waits_per_iter']:g}" if t["host_waits_per_iter"] is not None else ""
        launches = (f"{t['launches_per_micro_batch']}"
                    if t["launches_per_micro_batch"] is not None else "")
        opt_launches = (f"{t['optimizer_launches']}"
                        if t["optimizer_launches"] is not None else "")
        print(f"{t['model']:<18} {t['impl']:<6} {t['tokens_per_s']:>10,.0f} {t['tflops']:>8.1f} "
              f"{mfu} {100 * t['mfu_vs_gemm']:>6.1f}% {ratio:>10} "
              f"{t['peak_memory_bytes'] / 2**30:>9.2f} "
              f"{plan:>9} {t['ms_median']:>8.1f} {waits:>10} {launches:>11} {opt_launches:>12} "
              f"{outside:>11}")
    # The goal's figure: the best of the recipe's end-to-end rows (1.3b-train, 1.3b-train-*).
    e2e = [t for t in table if t["impl"] == "mtnlg" and t["model"].startswith("1.3b-train")]
    best = max(e2e, key=lambda t: t["mfu_vs_gemm"]) if e2e else None
    goals = []

    def goal(what, row, target):
        if row is None or row["mfu"] is None:
            return
        met = "met" if row["mfu"] >= target else "not met"
        goals.append({"goal": what, "row": row["model"], "mfu": row["mfu"], "target": target,
                      "met": row["mfu"] >= target})
        print(f"{what}: {row['model']} at {100 * row['mfu']:.1f}% MFU, {row['tflops']:.1f} "
              f"TFLOP/s (the goal, {100 * target:.0f}%: {met})")

    if best:
        met = "met" if best["mfu_vs_gemm"] >= 0.5 else "not met"
        print(f"1.3B recipe end to end: best {best['model']} at {100 * best['mfu_vs_gemm']:.1f}% "
              f"of the GEMM rate ({len(e2e)} rows; the goal, 50%: {met})")
        goal("1.3B recipe end to end", best, 0.55)
    gpt2 = [t for t in table if t["impl"] == "mtnlg" and t["model"].startswith("gpt2-124m")]
    goal("GPT-2 124M step", max(gpt2, key=lambda t: t["tflops"]) if gpt2 else None, 0.40)
    slices = [t for t in table if t["impl"] == "mtnlg" and t["model"].startswith("530b-layer")]
    if slices:
        top = max(slices, key=lambda t: t["tflops"])
        goal("530B layer, one tensor rank of 8", top, 0.50)
        for t in slices:
            print(f"  {t['model']}: attention {t['attention']}, {t['tflops']:.1f} TFLOP/s = "
                  f"{t['tflops'] / 126:.2f}x the paper's 126 TFLOP/s per A100 (40% of 312)")
    with open(out_path, "w") as f:
        json.dump({"gemm_ceiling_tflops": ceiling, "peak_tflops": peak, "rows": table,
                   "gemm": gemm, "e2e_best": best["model"] if best else None, "goals": goals},
                  f, indent=1)
    return 0


# Our kernel families as mtnlg-bench-attention names them (--kernels), by the forward and the
# backward each runs: flash2-128 is flash2's backward after its 128-row forward, and
# flash2-recompute flash2's forward before the backward that recomputes dS.
FORWARD_OF = {"blocked": "blocked", "flash2": "flash2", "flash2-128": "flash2-128",
              "flash2-recompute": "flash2"}
BACKWARD_OF = {"blocked": "blocked", "flash2": "flash2", "flash2-128": "flash2",
               "flash2-recompute": "flash2-recompute"}


def settings(forward, backward):
    """The environment that runs `forward` then `backward`, the variables that matter only."""
    fwd_flash2, bwd_flash2 = forward != "blocked", backward != "blocked"
    env = {"MTNLG_CUDA_ATTENTION": {(False, False): "blocked", (True, True): "flash2",
                                    (True, False): "flash2-fwd",
                                    (False, True): "flash2-bwd"}[(fwd_flash2, bwd_flash2)]}
    if fwd_flash2:
        env["MTNLG_CUDA_FLASH2_ROWS"] = "128" if forward == "flash2-128" else "64"
    if bwd_flash2:
        env["MTNLG_CUDA_FLASH2_DQ"] = "recompute" if backward == "flash2-recompute" else "stored"
    return env


def best_passes(rows, name, dropout):
    """Our fastest forward and backward for one shape and dropout, among the families that ran as
    asked (runs == kernels), and the settings that combine them; None without both."""
    ours = [r for r in rows if r.get("impl") == "mtnlg" and r["name"] == name
            and r["dropout"] == dropout and r.get("runs") == r.get("kernels")]
    fwd = [r for r in ours if r["kernels"] in FORWARD_OF]
    bwd = [r for r in ours if r["kernels"] in BACKWARD_OF]
    if not fwd or not bwd:
        return None
    f = min(fwd, key=lambda r: r["fwd_ms"])
    b = min(bwd, key=lambda r: r["bwd_ms"])
    forward, backward = FORWARD_OF[f["kernels"]], BACKWARD_OF[b["kernels"]]
    return {"name": name, "dropout": dropout, "forward": forward, "backward": backward,
            "fwd_ms": f["fwd_ms"], "bwd_ms": b["bwd_ms"], "env": settings(forward, backward)}


def attention(path, out_path):
    lines = [json.loads(line) for line in open(path) if line.strip()]
    rows = [r for r in lines if r.get("bench") == "attention"]
    table = []
    def anchor(impl, r):  # PyTorch's FA2 (torch) or cuDNN (cudnn) row of r's shape, as it ran
        return next((t for t in rows if t["impl"] == impl and t["name"] == r["name"]
                     and t["dropout"] == r["dropout"] and t["dtype"] == r["dtype"]
                     and (impl != "cudnn" or t["runs"] == "cudnn")), None)

    for r in rows:
        row = dict(r)
        for impl in ("torch", "cudnn"):
            a = anchor(impl, r)
            if a and r["impl"] == "mtnlg":
                row[f"{impl}_over_ours_fwd"] = a["fwd_ms"] / r["fwd_ms"]
                row[f"{impl}_over_ours_bwd"] = a["bwd_ms"] / r["bwd_ms"]
                row[f"{impl}_over_ours"] = (a["fwd_ms"] + a["bwd_ms"]) / (r["fwd_ms"] + r["bwd_ms"])
        table.append(row)
    order = {"torch": 0, "cudnn": 1}
    table.sort(key=lambda t: (t["name"], t["dropout"], order.get(t["impl"], 2)))
    print("attention alone (median call; TFLOP/s as FlashAttention counts: causal forward "
          "2 b h s^2 d, backward 2.5x; torch/ours and cudnn/ours: the time of PyTorch's FA2 and "
          "of cuDNN's fused attention over ours, > 1 ours faster)")
    print(f"{'shape':<14} {'drop':>4} {'impl':<6} {'runs':<8} {'fwd ms':>8} {'bwd ms':>8} "
          f"{'fwd TF/s':>8} {'bwd TF/s':>8} {'torch/ours fwd':>14} {'bwd':>5} {'both':>5} "
          f"{'cudnn/ours fwd':>14} {'bwd':>5} {'both':>5}")
    for t in table:
        ratios = ""
        for impl in ("torch", "cudnn"):
            if f"{impl}_over_ours" in t:
                ratios += (f" {t[f'{impl}_over_ours_fwd']:>14.2f} {t[f'{impl}_over_ours_bwd']:>5.2f} "
                           f"{t[f'{impl}_over_ours']:>5.2f}")
            else:
                ratios += f" {'':>14} {'':>5} {'':>5}"
        print(f"{t['name']:<14} {t['dropout']:>4g} {t['impl']:<6} {t['runs']:<8} "
              f"{t['fwd_ms']:>8.3f} {t['bwd_ms']:>8.3f} {t['fwd_tflops']:>8.1f} "
              f"{t['bwd_tflops']:>8.1f}{ratios.rstrip()}")
    best = []
    for name, dropout in sorted({(t["name"], t["dropout"]) for t in table}):
        b = best_passes(table, name, dropout)
        if b:
            best.append(b)
            env = " ".join(f"{k}={v}" for k, v in b["env"].items())
            print(f"fastest passes, {name} dropout {dropout:g}: forward {b['forward']} "
                  f"({b['fwd_ms']:.3f} ms), backward {b['backward']} ({b['bwd_ms']:.3f} ms): "
                  f"{env}")
    # The goal: our fastest forward and backward at least as fast as cuDNN's on the 1.3B and
    # 530B-tp8 shapes (each dropout measured).
    versus = []
    for b in best:
        c = next((t for t in table if t["impl"] == "cudnn" and t["runs"] == "cudnn"
                  and t["name"] == b["name"] and t["dropout"] == b["dropout"]), None)
        if c is None or b["name"] not in ("1.3b", "530b-tp8"):
            continue
        fwd, bwd = c["fwd_ms"] / b["fwd_ms"], c["bwd_ms"] / b["bwd_ms"]
        versus.append({"name": b["name"], "dropout": b["dropout"], "cudnn_over_ours_fwd": fwd,
                       "cudnn_over_ours_bwd": bwd, "met": fwd >= 1 and bwd >= 1})
        print(f"against cuDNN, {b['name']} dropout {b['dropout']:g}: our best forward "
              f"{fwd:.2f}x, backward {bwd:.2f}x cuDNN's speed (the goal, >= 1: "
              f"{'met' if fwd >= 1 and bwd >= 1 else 'not met'})")
    with open(out_path, "w") as f:
        json.dump({"rows": table, "best": best, "versus_cudnn": versus}, f, indent=1)
    return 0 if rows else 1


def attention_choice(path, name, dropout):
    best = next((b for b in json.load(open(path)).get("best", [])
                 if b["name"] == name and b["dropout"] == float(dropout)), None)
    if best is None:
        print(f"{path}: no fastest passes for {name} at dropout {dropout}", file=sys.stderr)
        return 1
    defaults = (settings("blocked", "blocked"), settings("flash2", "flash2"))
    if best["env"] not in defaults:
        print(" ".join(f"{k}={v}" for k, v in best["env"].items()))
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "demo":
        return demo(sys.argv[2])
    if len(sys.argv) == 5 and sys.argv[1] == "train-row":
        return train_row(sys.argv[2], sys.argv[3], sys.argv[4])
    if len(sys.argv) == 4 and sys.argv[1] == "bench":
        return bench(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 4 and sys.argv[1] == "attention":
        return attention(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 5 and sys.argv[1] == "attention-choice":
        return attention_choice(sys.argv[2], sys.argv[3], sys.argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
