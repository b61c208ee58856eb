#!/usr/bin/env bash
# Checkpoints under mixed precision (configs/tiny.yaml, dropout on; fp16 with an overflow
# injected at iteration 3, before the stop):
#  1. exact: precision bf16 and fp16 in (1,1,1) and in (2,2,2) with ZeRO-1, stopped after
#     iteration 4 (an evaluation) and resumed to 12, logs every loss, grad norm and validation
#     loss bit for bit as the run that never stopped (the fp32 masters and the moments are saved; the bf16 weights are the
#     masters rounded, so they come back exactly; fp16 also saves the loss scaler's state, the
#     skipped iterations and the tokens the LR schedule has not counted);
#  2. across precisions: a bf16 checkpoint resumed in fp32 (weights from the saved fp32 masters)
#     and an fp32 checkpoint resumed in bf16 (masters from the fp32 weights, weights rounded from
#     them) continue within the bf16 band (precision_band_test.sh) of the fp32 run that never
#     stopped. That the weights are the masters bit for bit: cmd_trainer_checkpoint_test.
# Usage: tests/cmd/precision_resume_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2" 512
# mtnlg-train with the test seams (tests/cmd/train_hooks_main.cc): MTNLG_INJECT_OVERFLOW below.
bin=$1/mtnlg-train-test-hooks
compare=tests/cmd/compare_layouts.py
u=0.00390625
grad_band=$(/usr/bin/python3 -c "import math; print($u * math.sqrt(24 * 2))")

train() {  # NAME NP TP PP ZERO ITERS [extra --set ...]
  local name=$1 np=$2 tp=$3 pp=$4 zero=$5 iters=$6
  shift 6
  run_layout "$name" "$np" --set "data.split=[9,1,0]" --set eval.interval=4 --set eval.iters=1 \
    --set parallel.micro_batch_size=1 --set batch.global_batch_size=8 \
    --set schedule.decay_tokens=4096 --set schedule.train_iters="$iters" \
    --set parallel.tensor="$tp" --set parallel.pipeline="$pp" --set parallel.zero_stage="$zero" "$@"
}

echo "== 1. exact bf16 and fp16 resume"
for lay in "bf16 1 1 1 0" "bf16 8 2 2 1" "fp16 1 1 1 0" "fp16 8 2 2 1"; do
  set -- $lay
  prec=$1
  shift
  name=$prec-np$1-tp$2-pp$3-z$4
  # fp16: a small initial loss scale and window, so the scale both grows and (injected on rank 0
  # at iteration 3) shrinks before the stop: the scaler's state must come back exactly.
  extra=(--set precision="$prec")
  [[ $prec == fp16 ]] && extra+=(--set optimizer.initial_loss_scale=256 --set optimizer.loss_scale_window=2 --set optimizer.hysteresis=1)
  dir=(--set checkpoint.dir="$tmp/$name/ckpt" --set checkpoint.resume=true "${extra[@]}")
  MTNLG_INJECT_OVERFLOW=$([[ $prec == fp16 ]] && echo 3) train "$name" "$@" 4 "${dir[@]}"
  train "$name" "$@" 12 "${dir[@]}"
  MTNLG_INJECT_OVERFLOW=$([[ $prec == fp16 ]] && echo 3) train "ref-$name" "$@" 12 "${extra[@]}"
  /usr/bin/python3 $compare --exact "$tmp" "ref-$name:$name"
done

echo "== 2. across precisions"
# bf16 -> fp32: the resumed fp32 weights are the saved masters.
train b2f 1 1 1 0 4 --set precision=bf16 --set checkpoint.dir="$tmp/b2f/ckpt" --set checkpoint.resume=true
train b2f 1 1 1 0 12 --set precision=fp32 --set checkpoint.dir="$tmp/b2f/ckpt" --set checkpoint.resume=true
# fp32 -> bf16: rounded weights, the fp32 weights kept as masters.
train f2b 1 1 1 0 4 --set precision=fp32 --set checkpoint.dir="$tmp/f2b/ckpt" --set checkpoint.resume=true
train f2b 1 1 1 0 12 --set precision=bf16 --set checkpoint.dir="$tmp/f2b/ckpt" --set checkpoint.resume=true
train whole-fp32 1 1 1 0 12 --set precision=fp32
/usr/bin/python3 $compare --band $u "$grad_band" "$tmp" whole-fp32:b2f whole-fp32:f2b
