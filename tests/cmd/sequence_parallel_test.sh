#!/usr/bin/env bash
# Sequence parallelism (parallel.sequence_parallel: true) against one process, within the layout
# tests' float32 tolerance (dropout on, so the masks must be the same rows' masks; evaluation every
# 10 iterations through the forward-only pipeline): (2,1,1), (2,2,2) with ZeRO-1, (2,2,1) with
# activation checkpointing, and (2,1,1) with micro-batches of 2 (rows of two sequences split over
# the tensor ranks). Then the bytes each rank sent against the planner's count, exactly, with and
# without sequence parallelism.
# Usage: tests/cmd/sequence_parallel_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"

train() {  # NAME NP TP PP MICRO [extra --set ...]
  local name=$1 np=$2 tp=$3 pp=$4 micro=$5
  shift 5
  run_layout "$name" "$np" --set "data.split=[9,1,0]" --set eval.interval=10 \
    --set eval.iters=1 --set schedule.train_iters=20 --set parallel.micro_batch_size="$micro" \
    --set batch.global_batch_size=8 --set model.num_layers=2 --set parallel.tensor="$tp" \
    --set parallel.pipeline="$pp" "$@"
}

train single 1 1 1 1
train single-mb2 1 1 1 2
train tp2-sp 2 2 1 1 --set parallel.sequence_parallel=true
train tp2-pp2-dp2-sp-zero1 8 2 2 1 --set parallel.sequence_parallel=true \
  --set parallel.zero_stage=1
train tp2-pp2-sp-ckpt 4 2 2 1 --set parallel.sequence_parallel=true \
  --set parallel.activation_checkpointing=true
train tp2-sp-mb2 2 2 1 2 --set parallel.sequence_parallel=true

/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" single:tp2-sp single:tp2-pp2-dp2-sp-zero1 \
  single:tp2-pp2-sp-ckpt single-mb2:tp2-sp-mb2

# Bytes sent: rank 0 logs comm_bytes every iteration; it must equal the planner's count for its
# stage, exactly.
for run in tp2-sp:2:1:1:false tp2-pp2-dp2-sp-zero1:8:2:1:false tp2-pp2-sp-ckpt:4:2:1:true \
  tp2-sp-mb2:2:1:2:false; do
  IFS=: read -r name world pp micro ckpt <<<"$run"
  zero=0
  [[ $name == *zero1 ]] && zero=1
  "$bin" --config configs/tiny.yaml --dry-run --json --world-size "$world" \
    --set model.num_layers=2 --set parallel.tensor=2 --set parallel.pipeline="$pp" \
    --set parallel.micro_batch_size="$micro" --set batch.global_batch_size=8 \
    --set parallel.zero_stage="$zero" --set parallel.sequence_parallel=true \
    --set parallel.activation_checkpointing="$ckpt" \
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" >"$tmp/$name/plan.json"
  /usr/bin/python3 - "$tmp/$name" <<'PY'
import json, sys
d = sys.argv[1]
want = json.load(open(f"{d}/plan.json"))["communication"][0]["total"]
got = [json.loads(l)["comm_bytes"] for l in open(f"{d}/metrics.jsonl") if '"train"' in l]
bad = [g for g in got if g != want]
print(f"{d}: comm_bytes {got[0]} per iteration, planned {want}")
sys.exit(1 if bad or not got else 0)
PY
done
