#!/usr/bin/env bash
# Mixed precision end to end: precision: bf16 follows fp32 over 200 iterations of the demo model
# (configs/demo-cpu.yaml on the test corpus, vocabulary 2048), and bf16 under (tp, pp, dp) =
# (2, 2, 2) and (1, 2, 4) with ZeRO-1 follows bf16 in one process over 200 iterations of the
# tiny model (dropout on), within a band derived from the bf16 format.
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
# rounding too. A gradient is a sum over tokens of products of the ~r = 12 rounded tensors per
# layer on its path, backward doubling them: its relative L2 error is about u * sqrt(2 r L) for
# L layers, and so is the grad norm's (the norm of the difference bounds the difference of
# norms). Layout runs against one process differ only in the order of fp32 sums and in where the
# bf16 partial sums of tensor parallelism are rounded (one more rounding per reduced tensor), so
# the same band applies.
#   loss (train every iteration, and valid): u = 3.9e-3 relative;
#   grad norm: u * sqrt(24 L) = 2.7e-2 for the tiny model (L = 2), 3.8e-2 for the demo (L = 4).
# Measured when written: demo bf16 vs fp32 2.0e-3 (loss), 6.6e-3 (grad norm); tiny bf16
# (2, 2, 2) vs one process 1.4e-3 and 1.5e-2; (1, 2, 4) ZeRO-1 6.5e-4 and 4.1e-3.
# Usage: tests/cmd/precision_band_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2" 2048
u=0.00390625
grad_band() { /usr/bin/python3 -c "import math; print($u * math.sqrt(24 * $1))"; }

demo() {  # NAME PRECISION
  "$bin" --config configs/demo-cpu.yaml --threads 2 --log-level warn \
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache" \
    --set model.vocab_size=2048 --set "data.split=[95,5,0]" --set schedule.train_iters=200 \
    --set eval.interval=50 --set eval.iters=2 --set precision="$2" \
    --set logging.metrics_file="$tmp/$1/metrics.jsonl"
}
demo demo-fp32 fp32
demo demo-bf16 bf16
/usr/bin/python3 tests/cmd/compare_layouts.py --band $u "$(grad_band 4)" "$tmp" \
  demo-fp32:demo-bf16

train() {  # NAME NP TP PP [extra --set ...]
  local name=$1 np=$2 tp=$3 pp=$4
  shift 4
  run_layout "$name" "$np" --set precision=bf16 --set "data.split=[9,1,0]" \
    --set eval.interval=50 --set eval.iters=1 --set schedule.train_iters=200 \
    --set parallel.micro_batch_size=1 --set batch.global_batch_size=8 \
    --set model.vocab_size=2048 --set parallel.tensor="$tp" --set parallel.pipeline="$pp" "$@"
}
train bf16-single 1 1 1
train bf16-tp2-pp2-dp2 8 2 2
train bf16-pp2-dp4-zero1 8 1 2 --set parallel.zero_stage=1
/usr/bin/python3 tests/cmd/compare_layouts.py --band $u "$(grad_band 2)" "$tmp" \
  bf16-single:bf16-tp2-pp2-dp2 bf16-single:bf16-pp2-dp4-zero1
