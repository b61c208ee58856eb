#!/usr/bin/env bash
# Checkpoint, resume and reshard end to end under mpirun (configs/tiny.yaml, dropout on, a batch
# ramp, evaluation):
#  1. exact: in (1,1,1), (2,2,2) with ZeRO-1 and (1,2,4) with ZeRO-1, a run stopped after
#     iteration 5 (schedule.train_iters 5, a checkpoint at the end) and resumed to 12 with
#     checkpoint.resume logs every loss, grad norm and validation loss bit for bit as the run
#     that never stopped; the metrics file is one run.
#  2. the reshard chain (2,2,2) -> (1,1,1) -> (1,2,2) -> (2,1,2), with and without ZeRO-1, one
#     checkpoint.dir resumed at each layout in turn (the padded vocabulary changes with tensor
#     size: vocab 500 padded to 500 or 600), within the layout tests' float32 tolerance of one
#     process that never stopped;
#  3. mtnlg-ckpt convert (offline) then resume = online reshard at the same layout, bit for bit;
#  4. mtnlg-ckpt export -> model.init_from gives the same first loss and grad norm as loading the
#     checkpoint's weights (checkpoint.load_optimizer: false), bit for bit.
# Usage: tests/cmd/resume_train_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2" 500
ckpt=$1/mtnlg-ckpt
compare=tests/cmd/compare_layouts.py

# NAME NP TP PP ZERO ITERS [extra --set ...]; the LR decay is fixed so that stopping early does
# not change the schedule.
train() {
  local name=$1 np=$2 tp=$3 pp=$4 zero=$5 iters=$6
  shift 6
  run_layout "$name" "$np" --set model.vocab_size=500 --set model.make_vocab_size_divisible_by=100 \
    --set "data.split=[9,1,0]" --set eval.interval="${eval_interval:-5}" --set eval.iters=1 \
    --set parallel.micro_batch_size=1 --set batch.global_batch_size=8 \
    --set "batch.rampup={start: 4, increment: 4, tokens: 256}" --set schedule.decay_tokens=4096 \
    --set schedule.train_iters="$iters" --set parallel.tensor="$tp" --set parallel.pipeline="$pp" \
    --set parallel.zero_stage="$zero" "$@"
}

echo "== 1. exact resume"
train whole 1 1 1 0 12
for lay in "1 1 1 0" "8 2 2 1" "8 1 2 1"; do
  set -- $lay
  name=resume-np$1-tp$2-pp$3-z$4
  train "$name" "$@" 5 --set checkpoint.dir="$tmp/$name/ckpt" --set checkpoint.resume=true
  train "$name" "$@" 12 --set checkpoint.dir="$tmp/$name/ckpt" --set checkpoint.resume=true
  [[ $(cat "$tmp/$name/ckpt/latest_checkpointed_iteration.txt") == 12 ]]
  # The same layout again, from scratch: the reference this resume must equal bit for bit.
  train "ref-$name" "$@" 12
  /usr/bin/python3 $compare --exact "$tmp" "ref-$name:$name"
done

echo "== 2. reshard chain (2,2,2) -> (1,1,1) -> (1,2,2) -> (2,1,2)"
eval_interval=4  # every part ends at an evaluation, as the run that never stopped evaluates
for zero in 0 1; do
  name=chain-z$zero
  dir=(--set checkpoint.dir="$tmp/$name/ckpt" --set checkpoint.resume=true)
  train "$name" 8 2 2 "$zero" 4 "${dir[@]}"
  train "$name" 1 1 1 "$zero" 8 "${dir[@]}"
  train "$name" 4 1 2 "$zero" 12 "${dir[@]}"
  train "$name" 4 2 1 "$zero" 16 "${dir[@]}"
done
train whole16 1 1 1 0 16
/usr/bin/python3 $compare "$tmp" whole16:chain-z0 whole16:chain-z1

echo "== 3. offline convert = online reshard"
src=$tmp/chain-z1/ckpt/iter_0000004
# Its progress in log lines (no terminal here, or --no-progress-bar): a model file per stage and
# an optimizer file per stage and data rank, 2 x (1 + 2) = 6, the last line once.
"$ckpt" --log-level info convert "$src" --output "$tmp/converted" --layout 1,2,2 --zero-stage 1 \
  --no-progress-bar >"$tmp/convert.out"
grep -q "convert: 3/6 shard files (50%)" "$tmp/convert.out" &&
  [[ $(grep -c "convert: 6/6 shard files (100%).*took" "$tmp/convert.out") == 1 ]] ||
  { echo "FAIL: convert's progress lines"; cat "$tmp/convert.out"; exit 1; }
"$ckpt" verify "$tmp/converted"
"$ckpt" inspect "$tmp/converted" | grep -q "layout          tensor 1 x pipeline 2 x data 2, ZeRO-1"
train online 4 1 2 1 8 --set checkpoint.load="$src"
train offline 4 1 2 1 8 --set checkpoint.load="$tmp/converted"
/usr/bin/python3 $compare --exact "$tmp" online:offline

echo "== 4. export -> model.init_from"
"$ckpt" export "$tmp/chain-z0/ckpt" --format hf-gpt2 --output "$tmp/export/model.safetensors"
grep -q '"n_layer": 2' "$tmp/export/config.json"
train from-export 1 1 1 0 1 --set model.init_from="$tmp/export/model.safetensors"
train from-ckpt 1 1 1 0 1 --set checkpoint.load="$tmp/chain-z0/ckpt" \
  --set checkpoint.load_optimizer=false
/usr/bin/python3 $compare --exact "$tmp" from-ckpt:from-export
echo "resume_train_test: ok"
