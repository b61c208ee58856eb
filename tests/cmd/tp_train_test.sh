#!/usr/bin/env bash
# Tensor parallelism end to end: the tiny recipe (4 heads, hidden 64, ffn 256, vocab 512) trained
# as one process and under mpirun as tp 2 (2 ranks), tp 4 (4 ranks), tp 2 x dp 2 (4 ranks) and
# tp 2 x dp 2 with ZeRO-1 must log the same loss and grad norm at every iteration, within the
# float32 tolerance of dp_train_test.sh, with dropout on (the attention-probs masks are keyed by
# the global head, so every layout draws the same ones).
# Usage: tests/cmd/tp_train_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"

train() {  # NAME NP TP MICRO [extra --set ...]
  local name=$1 np=$2 tp=$3 micro=$4
  shift 4
  run_layout "$name" "$np" --set "data.split=[1,0,0]" --set schedule.train_iters=20 \
    --set parallel.micro_batch_size="$micro" --set parallel.tensor="$tp" "$@"
}

train single-micro2 1 1 2
train tp2-micro2 2 2 2
train tp4-micro2 4 4 2
train tp2-dp2-micro2 4 2 2
train tp2-dp2-zero1-micro2 4 2 2 --set parallel.zero_stage=1

/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" \
  single-micro2:tp2-micro2 \
  single-micro2:tp4-micro2 \
  single-micro2:tp2-dp2-micro2 \
  single-micro2:tp2-dp2-zero1-micro2
