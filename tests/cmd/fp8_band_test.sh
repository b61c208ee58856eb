#!/usr/bin/env bash
# precision: fp8 end to end on the CPU's emulation (model/fp8_linear.h), 300 iterations of the
# tiny model (dropout on):
#  - fp8 follows bf16 in each format and scaling (hybrid and e4m3, delayed and current), within
#    the band derived below;
#  - fp8 under (tp, pp, dp) = (1, 2, 4) with ZeRO-1, (2, 1, 1), and (2, 1, 2) with sequence
#    parallelism and gradients reduced in bf16 follows fp8 in one process, and current scaling under tp 2 follows it in one
#    process: the amaxes are the largest over the data-parallel replicas and the tensor-parallel
#    shards, so every layout casts with the same scales (the layouts run the first 100
#    iterations, compared with the one-process run's first 100); a tp 2 run's checkpoint
#    verifies and resumes into one process;
#  - weights cast once an iteration (fp8.cache_weights) train bit for bit as a cast per use;
#  - a run stopped at iteration 10 and resumed from its checkpoint (the scales and amax histories
#    in it) continues bit for bit as the run that never stopped; a bf16 checkpoint loads into an
#    fp8 run with fresh scales, and says so.
#
# The band. fp8 runs bf16 everywhere but the linear layers' GEMMs, whose operands are cast to
# FP8: E4M3 keeps 4 significant bits (u = 2^-4 relative per rounding), E5M2 3 (u = 2^-3). The
# loss: as for bf16 (tests/cmd/precision_band_test.sh), each forward operand rounded once with
# relative error at most u moves the loss by less than u of its value, and the E4M3 forward's u is
#   loss: u = 2^-4 = 6.25e-2 relative.
# The grad norm: the typical relative L2 error of a gradient is sqrt(2 L sum of u_i^2) over the
# roundings on its path: per layer 8 forward operands in E4M3 (x and W of four linear layers)
# and 4 output gradients in E5M2 (hybrid; E4M3 under e4m3); for L = 2
#   grad norm: sqrt(4 (8 / 256 + 4 / 64)) = 0.61 (hybrid), sqrt(4 x 12 / 256) = 0.43 (e4m3),
# a typical size checked as the root mean square over the run (each iteration within twice).
# That first-order band is loose: the roundings of thousands of elements cancel in a norm
# (measured 2026-11-28, hybrid delayed: loss worst 1.6e-2, rms 3.4e-3; grad norm rms 2.7e-2);
# the casts themselves are checked exactly in tests/model/fp8_linear_test.cc.
# Layouts differ from one process only in the order of fp32 sums; a sum that lands on the other
# side of an FP8 rounding boundary moves by a whole FP8 step, and those moves accumulate over
# the updates like fp16's (precision_band_test.sh): 4 times bf16's one-step band,
#   loss 4 x 2^-8 = 1.6e-2, grad norm 4 x 2^-8 x sqrt(2 x 15 x 2) = 1.2e-1
# (measured: loss worst 3.9e-3, grad norm rms 9.1e-3).
# Tensor parallelism adds bf16 roundings: its partial sums are rounded to bf16 before they are
# reduced, so its activations and gradients differ from one process's by about one bf16 unit
# in many elements, and each such element's FP8 cast lands on the other side of a rounding
# boundary with probability about 2^-8 / 2^-4 = 1/16 (E4M3). A tp run's casts are one
# process's with a share of the elements rounded to the neighbouring FP8 value: a difference of
# the kind the FP8 band above bounds (and the same scales, checked exactly in
# tests/model/fp8_linear_test.cc), so tp layouts take fp8's own band, 0.0625 and 0.61
# (measured 2026-11-28 over 300 iterations: loss worst 1.2e-2 to 1.3e-2, grad norm rms 1.9e-2 to
# 2.3e-2, the size of fp8 against bf16: once the roundings differ the runs drift apart as far as
# any two; over the first 100: 4.0e-3 to 7.4e-3, 2.7e-2 to 3.3e-2).
# Usage: tests/cmd/fp8_band_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2" 2048

train() {  # NAME NP PRECISION [extra --set ...]
  local name=$1 np=$2 precision=$3
  shift 3
  run_layout "$name" "$np" --set precision="$precision" --set "data.split=[9,1,0]" \
    --set eval.interval=50 --set eval.iters=1 --set schedule.train_iters=300 \
    --set parallel.micro_batch_size=1 --set batch.global_batch_size=8 \
    --set model.vocab_size=2048 "$@"
}
train bf16 1 bf16
train fp8 1 fp8
train fp8-e4m3 1 fp8 --set fp8.format=e4m3
train fp8-current 1 fp8 --set fp8.scaling=current
# The layouts over the first 100 iterations of the same schedule (the decay still over 300
# iterations of 8 x 32 tokens), compared with the one-process run's first 100: a layout error is
# off from the first steps; a third of the processes' time.
layout() { train "$@" --set schedule.train_iters=100 --set schedule.decay_tokens=76800; }
layout fp8-pp2-dp4-zero1 8 fp8 --set parallel.pipeline=2 --set parallel.zero_stage=1
layout fp8-tp2 2 fp8 --set parallel.tensor=2 --set checkpoint.dir="$tmp/ckpt-tp2" \
  --set checkpoint.save_interval=100
layout fp8-tp2-sp-dp2 4 fp8 --set parallel.tensor=2 --set parallel.sequence_parallel=true \
  --set parallel.grad_reduce_dtype=bf16
layout fp8-current-tp2 2 fp8 --set parallel.tensor=2 --set fp8.scaling=current
/usr/bin/python3 tests/cmd/compare_layouts.py --band 0.0625 0.61 "$tmp" bf16:fp8 bf16:fp8-current
/usr/bin/python3 tests/cmd/compare_layouts.py --band 0.0625 0.43 "$tmp" bf16:fp8-e4m3
/usr/bin/python3 tests/cmd/compare_layouts.py --band 0.015625 0.12 --prefix "$tmp" \
  fp8:fp8-pp2-dp4-zero1
/usr/bin/python3 tests/cmd/compare_layouts.py --band 0.0625 0.61 --prefix "$tmp" fp8:fp8-tp2 \
  fp8:fp8-tp2-sp-dp2 fp8-current:fp8-current-tp2
# The tp 2 checkpoint: both tensor ranks' files, the scaling state in each; one process resumes
# from it (resharded), the scales loaded.
"$1/mtnlg-ckpt" verify "$tmp/ckpt-tp2"
log_level=info train fp8-from-tp2 1 fp8 --set schedule.train_iters=102 \
  --set checkpoint.dir="$tmp/ckpt-tp2" --set checkpoint.resume=true --set checkpoint.save_interval=0 \
  --set eval.interval=0 >"$tmp/from-tp2.log" 2>&1 ||
  { echo "FAIL resuming the tp 2 checkpoint in one process"; cat "$tmp/from-tp2.log"; exit 1; }
grep -q "fp8: the scaling state of 24 tensors loaded" "$tmp/from-tp2.log" ||
  { echo "FAIL the tp 2 checkpoint's scaling state was not loaded"; cat "$tmp/from-tp2.log"; exit 1; }

# The formats and scalings differ from each other (a run that ignored fp8: would not).
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
def losses(name):
    return [json.loads(l)["loss"] for l in open(f"{sys.argv[1]}/{name}/metrics.jsonl") if '"train"' in l]
a, b, c, d = losses("bf16"), losses("fp8"), losses("fp8-e4m3"), losses("fp8-current")
same = [n for n, x in (("e4m3", c), ("current", d), ("bf16", a)) if x == b]
print("fp8 runs differ from each other and from bf16" if not same else f"FAIL fp8 equals {same}")
sys.exit(1 if same else 0)
PY

# Resume: 10 iterations, stop, 10 more from the checkpoint = 20 without stopping, bit for bit.
resume() {  # NAME ITERS [extra --set ...]
  local name=$1 iters=$2
  shift 2
  train "$name" 1 fp8 --set schedule.train_iters="$iters" --set schedule.decay_tokens=5120 \
    --set eval.interval=0 "$@"
}
resume full 20
resume first 10 --set checkpoint.dir="$tmp/ckpt" --set checkpoint.save_interval=10
log_level=info resume second 20 --set checkpoint.dir="$tmp/ckpt" \
  --set checkpoint.save_interval=10 --set checkpoint.resume=true >"$tmp/second.log" 2>&1
grep -q "fp8: the scaling state of 24 tensors loaded" "$tmp/second.log" ||
  { echo "FAIL the resumed run did not load the FP8 scaling state"; cat "$tmp/second.log"; exit 1; }
mkdir -p "$tmp/resumed"
cat "$tmp/first/metrics.jsonl" "$tmp/second/metrics.jsonl" >"$tmp/resumed/metrics.jsonl"
/usr/bin/python3 tests/cmd/compare_layouts.py --exact "$tmp" full:resumed
"$1/mtnlg-ckpt" verify "$tmp/ckpt"

# fp8.cache_weights (the default: each weight cast once an iteration and reused by its 8
# micro-batches' forwards and backwards) changes no bit, in either scaling.
resume cached-current 20 --set fp8.scaling=current
resume uncached 20 --set fp8.cache_weights=false
resume uncached-current 20 --set fp8.scaling=current --set fp8.cache_weights=false
/usr/bin/python3 tests/cmd/compare_layouts.py --exact "$tmp" full:uncached \
  cached-current:uncached-current

# A bf16 checkpoint into an fp8 run: the weights load, the scales start afresh (logged).
train bf16-ckpt 1 bf16 --set schedule.train_iters=10 --set schedule.decay_tokens=5120 \
  --set eval.interval=0 --set checkpoint.save_interval=10 --set checkpoint.dir="$tmp/ckpt16"
log_level=info train fp8-from-bf16 1 fp8 --set schedule.train_iters=12 \
  --set schedule.decay_tokens=5120 --set eval.interval=0 --set checkpoint.dir="$tmp/ckpt16" \
  --set checkpoint.resume=true --set checkpoint.save_interval=0 >"$tmp/from16.log" 2>&1
grep -q "fp8: the checkpoint has no FP8 scaling state" "$tmp/from16.log" ||
  { echo "FAIL no word of fresh scales"; cat "$tmp/from16.log"; exit 1; }
echo "ok: fp8 resumes bit for bit with its scaling state and starts fresh scales from bf16"
