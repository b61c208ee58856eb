#!/usr/bin/python3
"""Compares the metrics of runs of one recipe under different parallel layouts.

Usage: compare_layouts.py [--exact | --band LOSS GRAD] [--prefix] DIR REF:OTHER [REF:OTHER ...]
DIR/NAME/metrics.jsonl holds each run's metrics. For every pair, each train iteration's loss
must agree within 1e-4 and grad norm within 1e-3 (relative), consumed samples exactly, and the
valid losses within 1e-4 (a run with eval.interval set must have logged validation lines: its
resolved_recipe.yaml says). Float32 sums in another order differ by
~1e-7 relative per step and training amplifies that a little over 20 iterations; a real error
(a missing or doubled all-reduce, a shard initialised or counted wrongly, the wrong samples) is
off by percents. --exact: every loss and grad norm must be bit-identical instead (a resumed run
in the layout that saved, against the run that never stopped). --band LOSS GRAD: the relative
tolerances of the loss (train and valid) and grad norm instead (mixed precision: the band a test
derives from the format). The grad norm's band is a typical size (the relative L2 error of a
gradient rounded through the model), so under --band the root mean square of the per-iteration
relative differences must be within GRAD, and each iteration within 2 GRAD: the roundings of two
runs are independent, and the worst of 200 iterations lands past their typical size (measured
on the tiny model in bf16: median 3e-3, worst 3e-2 to 4e-2). A real error is off by tens of
percent in every iteration. --prefix: OTHER may be a shorter run of the same recipe (fewer
train_iters): it is compared with REF's first iterations and the validations among them (a
layout checked over a third of a long reference run). Exits 1 on any mismatch.
"""
import math
import json
import sys


def load(directory, name, split):
    with open(f"{directory}/{name}/metrics.jsonl") as f:
        return [json.loads(line) for line in f if f'"split": "{split}"' in line]


def eval_interval(directory, name):
    """eval.interval of the run, from the resolved_recipe.yaml beside its metrics (0 if none)."""
    try:
        lines = open(f"{directory}/{name}/resolved_recipe.yaml").read().splitlines()
    except OSError:
        return 0
    for i, line in enumerate(lines):
        if line == "eval:":
            for sub in lines[i + 1:]:
                if sub.strip().startswith("interval:"):
                    return int(sub.split(":", 1)[1])
                if not sub.startswith(" "):
                    break
    return 0


def compare(directory, ref, other, exact, loss_tol=1e-4, grad_tol=1e-3, band=False,
            prefix=False):
    failures = 0
    grad_rel = []
    a, b = load(directory, ref, "train"), load(directory, other, "train")
    if prefix and b and len(b) < len(a):
        a = a[:len(b)]
        if a[-1]["iteration"] != b[-1]["iteration"]:
            print(f"FAIL {other} vs {ref}: {other}'s train lines are not {ref}'s first ones "
                  f"(iteration {b[-1]['iteration']} vs {a[-1]['iteration']})")
            return 1
    if not a or len(a) != len(b):
        print(f"FAIL {other} vs {ref}: {len(b)} vs {len(a)} train lines")
        return 1
    for x, y in zip(a, b):
        for key, tol in (("loss", loss_tol), ("grad_norm", grad_tol)):
            if x[key] is None or y[key] is None:  # an fp16 overflow skipped the update: null norm
                if x[key] is not None or y[key] is not None:
                    failures += 1
                    print(f"FAIL {other} vs {ref} iteration {x['iteration']}: {key} {y[key]} vs "
                          f"{x[key]} (one run skipped the update, the other did not)")
                continue
            rel = abs(x[key] - y[key]) / abs(x[key])
            if key == "grad_norm":
                grad_rel.append(rel)
                if band:
                    tol = 2 * grad_tol
            if (x[key] != y[key]) if exact else (rel > tol):
                failures += 1
                print(f"FAIL {other} vs {ref} iteration {x['iteration']}: {key} {y[key]} vs "
                      f"{x[key]} (rel {rel:.2e})")
        if x["consumed_samples"] != y["consumed_samples"]:
            failures += 1
            print(f"FAIL {other} vs {ref} iteration {x['iteration']}: consumed_samples")
    rms = math.sqrt(sum(r * r for r in grad_rel) / len(grad_rel)) if grad_rel else 0.0
    if band and rms > grad_tol:
        failures += 1
        print(f"FAIL {other} vs {ref}: grad norm differs by {rms:.2e} relative (root mean square "
              f"over {len(grad_rel)} iterations), more than {grad_tol:.2e}")
    va, vb = load(directory, ref, "valid"), load(directory, other, "valid")
    if prefix and b:
        va = [x for x in va if x["iteration"] <= b[-1]["iteration"]]
    if eval_interval(directory, ref) > 0 and not va:
        print(f"FAIL {ref}: eval.interval is set but the run logged no validation line")
        return failures + 1
    if len(va) != len(vb):
        print(f"FAIL {other} vs {ref}: {len(vb)} vs {len(va)} valid lines")
        return failures + 1
    for x, y in zip(va, vb):
        if x["iteration"] != y["iteration"] or (
                x["loss"] != y["loss"] if exact else abs(x["loss"] - y["loss"]) / abs(x["loss"]) > loss_tol):
            failures += 1
            print(f"FAIL {other} vs {ref} validation at {x['iteration']}: {y['loss']} vs "
                  f"{x['loss']}")
    if failures == 0:
        worst = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b))
        worst_grad = max((abs(x["grad_norm"] - y["grad_norm"]) / abs(x["grad_norm"])
                          for x, y in zip(a, b) if x["grad_norm"] is not None), default=0.0)
        grad_allowed = f"{2 * grad_tol:.2e}; root mean square {rms:.2e}, allowed {grad_tol:.2e}" \
            if band else f"{grad_tol:.2e}"
        spread = "" if exact else (f"; worst relative loss {worst:.2e} (allowed {loss_tol:.2e}), "
                                   f"grad norm {worst_grad:.2e} (allowed {grad_allowed})")
        print(f"ok: {other} matches {ref}{' bit for bit' if exact else ''} over {len(a)} iterations "
              f"(last loss {b[-1]['loss']:.6f} vs {a[-1]['loss']:.6f}{spread})")
    return failures


def main():
    args = sys.argv[1:]
    exact = bool(args) and args[0] == "--exact"
    if exact:
        args = args[1:]
    tols = {}
    if args and args[0] == "--band":
        tols = {"loss_tol": float(args[1]), "grad_tol": float(args[2]), "band": True}
        args = args[3:]
    if args and args[0] == "--prefix":
        tols["prefix"] = True
        args = args[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    failures = 0
    for pair in args[1:]:
        ref, other = pair.split(":")
        failures += compare(args[0], ref, other, exact, **tols)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
