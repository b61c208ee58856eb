#!/usr/bin/env bash
# Tensor x pipeline x data together: the issue's (2, 2, 2) layout (tp 2 x pp 2 x dp 2, 8 ranks)
# with and without ZeRO-1, and (2, 2, 1), under mpirun must log the same loss and grad norm at
# every iteration as one process, within the float32 tolerance of dp_train_test.sh (dropout on;
# evaluation through the forward-only pipeline every 10 iterations must match too). Global batch
# 8 of micro-batches of 1 gives 4 (dp 2) or 8 (dp 1) micro-batches, more than the 2 stages, so
# warmup, steady 1F1B and cooldown all run.
# Usage: tests/cmd/tp_pp_train_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"

train() {  # NAME NP TP PP [extra --set ...]
  local name=$1 np=$2 tp=$3 pp=$4
  shift 4
  run_layout "$name" "$np" --set "data.split=[9,1,0]" --set eval.interval=10 \
    --set eval.iters=1 --set schedule.train_iters=20 --set parallel.micro_batch_size=1 \
    --set batch.global_batch_size=8 --set model.num_layers=2 --set parallel.tensor="$tp" \
    --set parallel.pipeline="$pp" "$@"
}

train single 1 1 1
train tp2-pp2 4 2 2
train tp2-pp2-dp2 8 2 2
train tp2-pp2-dp2-zero1 8 2 2 --set parallel.zero_stage=1

/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" \
  single:tp2-pp2 single:tp2-pp2-dp2 single:tp2-pp2-dp2-zero1

# Bytes sent: rank 0 (stage 0) logs comm_bytes every iteration; it must equal the planner's
# count for stage 0 of the same layout (cmd/planner.h communication_per_iteration), exactly.
for run in tp2-pp2-dp2:0 tp2-pp2-dp2-zero1:1; do
  name=${run%:*} zero=${run#*:}
  "$bin" --config configs/tiny.yaml --dry-run --json --world-size 8 --set model.num_layers=2 \
    --set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.micro_batch_size=1 \
    --set batch.global_batch_size=8 --set parallel.zero_stage="$zero" \
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" >"$tmp/$name/plan.json"
  /usr/bin/python3 tests/cmd/check_plan.py "$tmp/$name"
done

# Memory: every rank of tp 2 x pp 2 x dp 2 with activation checkpointing (stages hold different
# in-flight micro-batches, embeddings and head, pipeline receive buffers) logs its measured peak
# beside its stage's plan; they must be equal to the byte (cmd/planner.h; the plan follows
# gpt_stage.cc's allocations and the pipeline's). Then the same with ZeRO-1, whose
# reduce-scatter buffers the plan counts too.
for zero in 0 1; do
  mpirun --bind-to none --oversubscribe --allow-run-as-root -np 8 "$bin" --config configs/tiny.yaml \
    --threads 1 --log-level info --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" \
    --set data.cache_dir="$tmp/cache" --set schedule.train_iters=2 --set model.num_layers=4 \
    --set batch.global_batch_size=8 --set parallel.micro_batch_size=1 --set parallel.tensor=2 \
    --set parallel.pipeline=2 --set parallel.activation_checkpointing=true \
    --set parallel.zero_stage=$zero \
    --set logging.metrics_file="$tmp/memory$zero/metrics.jsonl" >"$tmp/memory$zero.log" 2>&1
  /usr/bin/python3 - "$tmp/memory$zero.log" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1]) if "memory after the first iteration" in l]
pat = re.compile(r"\[rank (\d+)\].*peak ([\d.]+) MiB measured, ([\d.]+) MiB planned "
                 r"\(([-+\d.]+)%; (\d+) B, (\d+) B\)")
seen = {}
for l in lines:
    m = pat.search(l)
    rank, measured, planned = int(m.group(1)), int(m.group(5)), int(m.group(6))
    seen[rank] = measured == planned
    print(f"{sys.argv[1].split('/')[-1]} rank {rank}: {measured} B measured, {planned} B planned")
sys.exit(1 if len(seen) != 8 or not all(seen.values()) else 0)
PY
done
