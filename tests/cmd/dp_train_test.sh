#!/usr/bin/env bash
# Data parallelism end to end: the tiny recipe trained as one process and as 2 and 4 ranks under
# mpirun (real processes, PMIx bootstrap, Gloo all-reduce) must log the same loss and grad norm
# at every iteration, within float32 reduction-order tolerance; so must 2 and 4 ranks with ZeRO-1
# (parallel.zero_stage: 1, optimizer state partitioned over the data ranks); with
# parallel.cuda_graph (the reduction after backward) the same bits as without.
# Usage: tests/cmd/dp_train_test.sh BUILD_DIR SOURCE_DIR [mpirun|srun]
# With srun (SLURM_CONF set, e.g. the local cluster of scripts/slurm/cluster.sh), the ranks are
# started by Slurm's PMIx server instead of Open MPI's.
set -euo pipefail
launcher=${3:-mpirun}
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"

train() {  # NAME NP MICRO [extra --set ...]
  local name=$1 np=$2 micro=$3
  shift 3
  local data=()
  [[ $np != 1 ]] && data=(--set parallel.data="$np")
  run_layout "$name" "$np" --set "data.split=[1,0,0]" --set schedule.train_iters=20 \
    --set parallel.micro_batch_size="$micro" "${data[@]}" "$@"
}

train single-micro2 1 2
train dp2-micro2 2 2
train single-micro1 1 1
train dp4-micro1 4 1
# The after-backward gradient reduction (the runs above overlap it with backward, the default).
train dp2-no-overlap-micro2 2 2 --set parallel.overlap_grad_reduce=false
# Many buckets (10 KiB each: about 120 for the tiny model), launched in order as backward fills them.
train dp4-buckets-micro1 4 1 --set parallel.grad_bucket_mb=0.01
# ZeRO-1: the optimizer partitioned over the data ranks must train the same model.
train dp2-zero1-micro2 2 2 --set parallel.zero_stage=1
train dp4-zero1-micro1 4 1 --set parallel.zero_stage=1
# parallel.cuda_graph: each rank's micro-batches replayed from one recording (the reduction after
# backward, outside it): the same calls, so the same bits as without it.
train dp2-no-overlap-graph-micro2 2 2 --set parallel.overlap_grad_reduce=false \
  --set parallel.cuda_graph=true
train dp2-zero1-micro1 2 1 --set parallel.zero_stage=1
train dp2-zero1-graph-micro1 2 1 --set parallel.zero_stage=1 --set parallel.cuda_graph=true

/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" \
  single-micro2:dp2-micro2 \
  single-micro2:dp2-no-overlap-micro2 \
  single-micro1:dp4-micro1 \
  single-micro1:dp4-buckets-micro1 \
  single-micro2:dp2-zero1-micro2 \
  single-micro1:dp4-zero1-micro1 \
  single-micro1:dp2-zero1-micro1
/usr/bin/python3 tests/cmd/compare_layouts.py --exact "$tmp" \
  dp2-no-overlap-micro2:dp2-no-overlap-graph-micro2 \
  dp2-zero1-micro1:dp2-zero1-graph-micro1
