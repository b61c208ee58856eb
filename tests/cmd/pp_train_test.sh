#!/usr/bin/env bash
# Pipeline parallelism end to end: the tiny recipe trained with the 1F1B schedule on 2 stages,
# 4 stages (4 layers) and 2 stages x 2 data ranks (with and without ZeRO-1) under mpirun must log
# the same loss and grad norm at every iteration as one process with the same layers, within the
# float32 tolerance of dp_train_test.sh. Global batch 8 with micro-batches of 1 or 2 gives more
# micro-batches than stages, so warmup, steady 1F1B and cooldown all run. Evaluation (forward-only
# pipeline) every 10 iterations must match too.
# Usage: tests/cmd/pp_train_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"

train() {  # NAME NP MICRO LAYERS PIPELINE [extra --set ...]
  local name=$1 np=$2 micro=$3 layers=$4 pp=$5
  shift 5
  run_layout "$name" "$np" --set "data.split=[9,1,0]" --set eval.interval=10 \
    --set eval.iters=1 --set schedule.train_iters=20 --set parallel.micro_batch_size="$micro" \
    --set batch.global_batch_size=8 --set model.num_layers="$layers" \
    --set parallel.pipeline="$pp" "$@"
}

train single-l2-micro2 1 2 2 1
train single-l2-micro1 1 1 2 1
train single-l4-micro1 1 1 4 1
train pp2-micro1 2 1 2 2                 # m = 8 per stage
train pp4-l4-micro1 4 1 4 4              # m = 8, 4 stages of one layer
train pp2-dp2-micro2 4 2 2 2 --set parallel.grad_bucket_mb=0.01   # m = 2 = pp; many buckets
train pp2-dp2-zero1-micro1 4 1 2 2 --set parallel.zero_stage=1   # m = 4
train pp2-dp4-micro1 8 1 2 2             # the (1, 2, 4) layout: m = 2 per data rank
train pp2-dp4-zero1-micro1 8 1 2 2 --set parallel.zero_stage=1   # (1, 2, 4) with ZeRO-1

/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" \
  single-l2-micro1:pp2-micro1 \
  single-l4-micro1:pp4-l4-micro1 \
  single-l2-micro2:pp2-dp2-micro2 \
  single-l2-micro1:pp2-dp2-zero1-micro1 \
  single-l2-micro1:pp2-dp4-micro1 \
  single-l2-micro1:pp2-dp4-zero1-micro1
