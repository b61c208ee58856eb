#!/usr/bin/env bash
# Tensor x pipeline x data together: the (2, 2, 2) layout (tp 2 x pp 2 x dp 2, 8 ranks)
# with and without ZeRO-1, and (2, 2, 1), under mpirun must log the same loss and grad norm at
# every iteration as one process, within the float32 tolerance of dp_train_test.sh (dropout on;
# evaluation through the forward-only pipeline every 10 iterations must match too). Global batch
# 8 of micro-batches of 1 gives 4 (dp 2) or 8 (dp 1) micro-batches, more than the 2 stages, so
# warmup, steady 1F1B and cooldown all run.
# Usage: tests/cmd/tp_pp_train_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
bin=$1/mtnlg-train
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "$src"
/usr/bin/python3 tests/cmd/make_tiny_corpus.py "$tmp/corpus" 400 512

train() {  # NAME NP TP PP [extra --set ...]
  local name=$1 np=$2 tp=$3 pp=$4
  shift 4
  local args=(--config configs/tiny.yaml --threads 1 --log-level warn
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set "data.split=[9,1,0]"
    --set eval.interval=10 --set eval.iters=1
    --set schedule.train_iters=20 --set parallel.micro_batch_size=1
    --set batch.global_batch_size=8 --set model.num_layers=2
    --set parallel.tensor="$tp" --set parallel.pipeline="$pp" --set data.cache_dir="$tmp/cache"
    --set logging.metrics_file="$tmp/$name/metrics.jsonl" "$@")
  if [[ $np == 1 ]]; then
    "$bin" "${args[@]}"
  else
    mpirun --oversubscribe --allow-run-as-root -np "$np" "$bin" "${args[@]}"
  fi
}

train single 1 1 1
train tp2-pp2 4 2 2
train tp2-pp2-dp2 8 2 2
train tp2-pp2-dp2-zero1 8 2 2 --set parallel.zero_stage=1

/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" \
  single:tp2-pp2 single:tp2-pp2-dp2 single:tp2-pp2-dp2-zero1
