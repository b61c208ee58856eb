#!/usr/bin/env bash
# Mixed precision end to end, within a band derived from each format:
#  - bf16 follows fp32 over 200 iterations of the demo model (configs/demo-cpu.yaml on the test
#    corpus, vocabulary 2048); fp16 follows fp32 over 200 iterations of the tiny model (fp16's
#    GEMMs run through fp32 on the CPU: the demo model would take minutes);
#  - bf16 and fp16 under (tp, pp, dp) = (2, 2, 2) and (1, 2, 4) with ZeRO-1 follow their own
#    one-process run of 200 iterations of the tiny model (dropout on) over its first 100 (the
#    layouts run 100 of the same schedule); so do bf16 runs that
#    reduce their gradients in bf16 (parallel.grad_reduce_dtype: bf16), and every mixed run's
#    logged bytes per iteration equal the planner's;
#  - fp16 with an overflow injected on one rank (global rank 5 of 8, not the logging rank) at
#    iteration 5: every rank skips that update (else the layouts' runs part), the logged
#    skipped_iterations becomes 1 there and the loss scale halves after it, and the run follows
#    the one-process run with the same injection.
# fp16 runs start at optimizer.initial_loss_scale 4096 (tiny's gradients never overflow there),
# so that no run skips updates the others make, except where injected.
#
# The band. bf16 keeps 8 significant bits: each rounding is off by at most u = 2^-8 relative.
# Under bf16 the weights a forward sees are the fp32 masters rounded (relative error <= u each),
# and each of the ~12 tensors a layer stores is rounded once more. To first order the loss is
# moved by the sum of these perturbations times its sensitivities; the roundings are
# independent with random signs, so over the thousands of weights and tokens that feed one
# loss they largely cancel, and their sum moves the loss by less than u of its value (the
# cross entropy of logits perturbed by at most u relative changes by at most u * |logit|,
# and |logit| stays below the loss scale over training). The masters themselves are the
# fp32 optimizer's, so the trajectories separate only through the gradients, which differ by
# rounding too. A gradient is a sum over tokens of products of the ~r rounded tensors per layer
# on its path, backward doubling them: its relative L2 error is about u * sqrt(2 r L) for L
# layers, and so is the grad norm's (the norm of the difference bounds the difference of norms).
# r = 12 stored tensors, plus in bf16 the three operands attention rounds before its bf16
# products (core/cpu/attention_bf16.cc: the probs into p v, the dropped probs, the softmax
# gradient): r = 15 for bf16; fp16's products run in fp32 (r = 12). Layout runs against one
# process differ only in the order of fp32 sums and in where the bf16 partial sums of tensor
# parallelism are rounded (one more rounding per reduced tensor), so the same band applies.
#   loss (train every iteration, and valid): u = 3.9e-3 relative for bf16;
#   grad norm: u * sqrt(30 L): bf16 3.0e-2 for the tiny model (L = 2), 4.3e-2 for the demo
#   (L = 4). That is a typical size, not a worst case: compare_layouts.py --band checks the
#   root mean square over the run against it, and each iteration against twice it.
# fp16 needs one more factor. bf16's coarse rounding absorbs the small differences two runs'
# fp32 masters pick up (nearby masters round to the same bf16 weights), so its runs stay within
# the one-step band; fp16's rounding is 8x finer and absorbs 8x less, and the per-update
# differences (measured: ~1 u per update, as one step's band predicts) accumulate over the 200
# updates like a random walk. Measured: fp16 vs fp32 1.1 u (loss) and 2.7 times the one-step
# grad band; (2, 2, 2) vs one process the same. The fp16 band is 4 times the one-step band:
#   fp16 loss 4u = 2.0e-3, grad norm 4 u sqrt(24 L) = 1.4e-2 (tiny).
# Measured with bf16 attention products (worst loss; grad norm worst and root mean square): demo
# bf16 vs fp32 1.9e-3, 4.9e-3; tiny bf16 (2, 2, 2) vs one process 1.9e-3, 2.6e-2 and 5.5e-3;
# with grad_reduce_dtype bf16 1.9e-3, 3.2e-2 and 5.5e-3 (before them: 1.5e-3, 1.8e-2 and 4.7e-3).
# Usage: tests/cmd/precision_band_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2" 2048
# mtnlg-train with the test seams (tests/cmd/train_hooks_main.cc): MTNLG_INJECT_OVERFLOW below.
bin=$1/mtnlg-train-test-hooks
u=0.00390625    # bf16
u16=0.001953125  # fp16: 4 x 2^-11 (see above)
grad_band() { /usr/bin/python3 -c "import math; print($1 * math.sqrt(2 * $3 * $2))"; }  # U L R

demo() {  # NAME PRECISION
  "$bin" --config configs/demo-cpu.yaml --threads 2 --log-level warn \
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache" \
    --set model.vocab_size=2048 --set "data.split=[95,5,0]" --set schedule.train_iters=200 \
    --set eval.interval=50 --set eval.iters=2 --set precision="$2" \
    --set logging.metrics_file="$tmp/$1/metrics.jsonl"
}
demo demo-fp32 fp32
demo demo-bf16 bf16
/usr/bin/python3 tests/cmd/compare_layouts.py --band $u "$(grad_band $u 4 15)" "$tmp" \
  demo-fp32:demo-bf16

train() {  # NAME NP TP PP PRECISION [extra --set ...]
  local name=$1 np=$2 tp=$3 pp=$4 precision=$5
  shift 5
  run_layout "$name" "$np" --set precision="$precision" --set optimizer.initial_loss_scale=4096 \
    --set "data.split=[9,1,0]" \
    --set eval.interval=50 --set eval.iters=1 --set schedule.train_iters=200 \
    --set parallel.micro_batch_size=1 --set batch.global_batch_size=8 \
    --set model.vocab_size=2048 --set parallel.tensor="$tp" --set parallel.pipeline="$pp" "$@"
}
# The eight-rank layouts over the first 100 iterations of the same schedule (the decay still
# over 200 iterations of 8 x 32 tokens), compared with the one-process runs' first 100: a layout
# error is off from the first steps; half their time.
layout() { train "$@" --set schedule.train_iters=100 --set schedule.decay_tokens=51200; }
train fp32-single 1 1 1 fp32
for p in bf16 fp16; do
  train $p-single 1 1 1 $p
  layout $p-tp2-pp2-dp2 8 2 2 $p
  layout $p-pp2-dp4-zero1 8 1 2 $p --set parallel.zero_stage=1
done
# parallel.grad_reduce_dtype: bf16 sums the data-parallel gradients in bf16: one more rounding
# per reduced gradient, inside the same band.
layout bf16-tp2-pp2-dp2-r16 8 2 2 bf16 --set parallel.grad_reduce_dtype=bf16
layout bf16-pp2-dp4-zero1-r16 8 1 2 bf16 --set parallel.zero_stage=1 \
  --set parallel.grad_reduce_dtype=bf16
/usr/bin/python3 tests/cmd/compare_layouts.py --band $u "$(grad_band $u 2 15)" --prefix "$tmp" \
  bf16-single:bf16-tp2-pp2-dp2 bf16-single:bf16-pp2-dp4-zero1 \
  bf16-single:bf16-tp2-pp2-dp2-r16 bf16-single:bf16-pp2-dp4-zero1-r16

# Bytes: rank 0's comm_bytes every iteration equal the planner's count for its stage
# (cmd/planner.h communication_per_iteration: fp32 main gradients, bf16 activations, and half
# the gradient bytes with grad_reduce_dtype bf16), exactly.
for run in "bf16-tp2-pp2-dp2 2 2 0 fp32" "bf16-tp2-pp2-dp2-r16 2 2 0 bf16" \
  "bf16-pp2-dp4-zero1-r16 1 2 1 bf16" "fp16-pp2-dp4-zero1 1 2 1 fp32"; do
  set -- $run
  name=$1 prec=${1%%-*}
  "$bin" --config configs/tiny.yaml --dry-run --json --world-size 8 --set precision="$prec" \
    --set model.vocab_size=2048 --set parallel.tensor="$2" --set parallel.pipeline="$3" \
    --set parallel.micro_batch_size=1 --set batch.global_batch_size=8 \
    --set parallel.zero_stage="$4" --set parallel.grad_reduce_dtype="$5" \
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" >"$tmp/$name/plan.json"
  /usr/bin/python3 - "$tmp/$name" <<'PY'
import json, sys
d = sys.argv[1]
want = json.load(open(f"{d}/plan.json"))["communication"][0]["total"]
got = [json.loads(l)["comm_bytes"] for l in open(f"{d}/metrics.jsonl") if '"train"' in l]
print(f"{d.split('/')[-1]}: comm_bytes {got[0]} per iteration, planned {want}")
sys.exit(1 if not got or any(g != want for g in got) else 0)
PY
done
/usr/bin/python3 tests/cmd/compare_layouts.py --band $u16 "$(grad_band $u16 2 12)" "$tmp" \
  fp32-single:fp16-single
/usr/bin/python3 tests/cmd/compare_layouts.py --band $u16 "$(grad_band $u16 2 12)" --prefix \
  "$tmp" fp16-single:fp16-tp2-pp2-dp2 fp16-single:fp16-pp2-dp4-zero1

# Memory with grad_reduce_dtype bf16: the bf16 copy the sum runs in comes from the backend
# (parallel/grad_sync.h), so every rank's measured peak equals its plan, that copy included
# (StagePlan::reduce_staging_bytes); bytes again as planned. Three iterations at info level.
for run in "r16-peak-tp2-pp2-dp2 2 2 0 false" "r16-peak-tp2-pp2-dp2-overlap 2 2 0 true" \
  "r16-peak-pp2-dp4-zero1 1 2 1 false"; do
  set -- $run
  name=$1
  mkdir -p "$tmp/$name"
  opts=(--set precision=bf16 --set model.vocab_size=2048 --set parallel.tensor="$2"
    --set parallel.pipeline="$3" --set parallel.micro_batch_size=1
    --set batch.global_batch_size=8 --set parallel.zero_stage="$4"
    --set parallel.overlap_grad_reduce="$5" --set parallel.grad_reduce_dtype=bf16
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]")
  "$bin" --config configs/tiny.yaml --dry-run --json --world-size 8 "${opts[@]}" \
    >"$tmp/$name/plan.json"
  mpirun --oversubscribe --allow-run-as-root -np 8 "$bin" --config configs/tiny.yaml \
    --threads 1 "${opts[@]}" --set data.cache_dir="$tmp/cache" --set schedule.train_iters=3 \
    --set logging.metrics_file="$tmp/$name/metrics.jsonl" >"$tmp/$name.log" 2>&1 ||
    { cat "$tmp/$name.log"; exit 1; }
  /usr/bin/python3 tests/cmd/check_plan.py "$tmp/$name" --log "$tmp/$name.log" --ranks 8
done

# The injected overflow: rank 5 of the (2, 2, 2) run, the one rank of the single run.
MTNLG_INJECT_OVERFLOW=5:5 layout fp16-inject-tp2-pp2-dp2 8 2 2 fp16 --set optimizer.hysteresis=1 \
  --set parallel.zero_stage=1
MTNLG_INJECT_OVERFLOW=5 layout fp16-inject-single 1 1 1 fp16 --set optimizer.hysteresis=1
/usr/bin/python3 tests/cmd/compare_layouts.py --band $u16 "$(grad_band $u16 2 12)" "$tmp" \
  fp16-inject-single:fp16-inject-tp2-pp2-dp2
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
def train(name):
    return {l["iteration"]: l for l in map(json.loads, open(f"{d}/{name}/metrics.jsonl")) if l["split"] == "train"}
plain = train("fp16-single")
for name in ("fp16-inject-single", "fp16-inject-tp2-pp2-dp2"):
    at = train(name)
    skipped = [i for i, l in sorted(at.items()) if l["grad_norm"] is None]
    print(f"{name}: skipped {skipped}; loss scale {at[5]['loss_scale']} -> {at[6]['loss_scale']}; "
          f"lr at 4, 5, 6: {at[4]['lr']}, {at[5]['lr']}, {at[6]['lr']} (uninjected 5: {plain[5]['lr']})")
    ok = (skipped == [5] and at[4]["skipped_iterations"] == 0 and at[5]["skipped_iterations"] == 1
          and at[100]["skipped_iterations"] == 1 and at[5]["loss_scale"] == 4096
          and at[6]["loss_scale"] == 2048
          # The schedule stands still over the skipped iteration, then resumes where it was.
          and at[5]["lr"] == at[4]["lr"] and at[6]["lr"] == plain[5]["lr"])
    if not ok:
        sys.exit(f"FAIL {name}: the injected overflow did not skip exactly iteration 5, halve "
                 "the scale and hold the LR schedule")
PY
