#!/usr/bin/env bash
# The interleaved 1F1B schedule (parallel.virtual_pipeline: 2) against one process, within the
# layout tests' float32 tolerance (dropout on; evaluation every 10 iterations through the
# chunks): (1,2,1) and (1,4,1), (2,2,2) with ZeRO-1, and (2,2,2) with ZeRO-1 and sequence
# parallelism together; (1,2,2) with gradient buckets all-reduced as each chunk's last backward
# finishes them (overlapped, small buckets). Then, for each, the bytes rank 0 sent against the planner's count and
# every rank's measured peak against its plan, exactly; and a checkpoint saved with 2 chunks
# resumed with 1 (parameters are named globally), and converted offline to one process and
# resumed there, each continuing as the run that never stopped; and exported.
# Usage: tests/cmd/interleaved_train_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"

common=(--set "data.split=[9,1,0]" --set eval.interval=10 --set eval.iters=1
  --set schedule.train_iters=20 --set parallel.micro_batch_size=1 --set batch.global_batch_size=8)
train() {  # NAME NP LAYERS TP PP V [extra --set ...]: logs at info in $tmp/NAME.log
  local name=$1 np=$2 layers=$3 tp=$4 pp=$5 v=$6
  shift 6
  local args=(--config configs/tiny.yaml --threads 1 --log-level info
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache"
    --set logging.metrics_file="$tmp/$name/metrics.jsonl" "${common[@]}"
    --set model.num_layers="$layers" --set parallel.tensor="$tp" --set parallel.pipeline="$pp"
    --set parallel.virtual_pipeline="$v" "$@")
  local launch=()
  [[ $np == 1 ]] || launch=(mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$np")
  "${launch[@]}" "$bin" "${args[@]}" >"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; exit 1; }
}

train single4 1 4 1 1 1
train single8 1 8 1 1 1
train pp2-v2 2 4 1 2 2 --set checkpoint.dir="$tmp/ckpt" --set checkpoint.save_interval=10
train pp4-v2 4 8 1 4 2
train pp2-dp2-v2-overlap 4 4 1 2 2 --set parallel.overlap_grad_reduce=true \
  --set parallel.grad_bucket_mb=0.01
train tp2-pp2-dp2-v2-zero1 8 4 2 2 2 --set parallel.zero_stage=1
train tp2-pp2-dp2-v2-zero1-sp 8 4 2 2 2 --set parallel.zero_stage=1 \
  --set parallel.sequence_parallel=true

/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" single4:pp2-v2 single8:pp4-v2 \
  single4:pp2-dp2-v2-overlap \
  single4:tp2-pp2-dp2-v2-zero1 single4:tp2-pp2-dp2-v2-zero1-sp

# The log names the schedule.
grep -q "pipeline parallel (interleaved 1F1B, 2 chunks): stage 0 of 2, layers \[0, 1), \[2, 3)" \
  "$tmp/pp2-v2.log"

# Bytes: rank 0's comm_bytes every iteration equal the plan for stage 0; memory: every rank's
# measured peak after the first iteration equals its stage's plan.
for run in pp2-v2:2:4:1:2:0:false pp4-v2:4:8:1:4:0:false pp2-dp2-v2-overlap:4:4:1:2:0:false \
  tp2-pp2-dp2-v2-zero1:8:4:2:2:1:false \
  tp2-pp2-dp2-v2-zero1-sp:8:4:2:2:1:true; do
  IFS=: read -r name world layers tp pp zero sp <<<"$run"
  "$bin" --config configs/tiny.yaml --dry-run --json --world-size "$world" \
    --set model.num_layers="$layers" --set parallel.tensor="$tp" --set parallel.pipeline="$pp" \
    --set parallel.virtual_pipeline=2 --set parallel.micro_batch_size=1 \
    --set batch.global_batch_size=8 --set parallel.zero_stage="$zero" \
    --set parallel.sequence_parallel="$sp" \
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" >"$tmp/$name/plan.json"
  /usr/bin/python3 tests/cmd/check_plan.py "$tmp/$name" --log "$tmp/$name.log" --ranks "$world"
done

# A checkpoint of 2 chunks per stage, resumed with 1: iterations 11-20 as the run that went on.
train pp2-v1-resumed 2 4 1 2 1 --set checkpoint.load="$tmp/ckpt/iter_0000010" \
  --set checkpoint.dir="$tmp/ckpt-v1"
# The same checkpoint resharded offline to one process (mtnlg-ckpt convert), resumed there; and
# exported whole (the offline tools gather it into one stage: one chunk).
"$1/mtnlg-ckpt" convert "$tmp/ckpt/iter_0000010" --output "$tmp/ckpt-111" --layout 1,1,1 \
  >"$tmp/convert.log" 2>&1 || { cat "$tmp/convert.log"; exit 1; }
"$1/mtnlg-ckpt" export "$tmp/ckpt/iter_0000010" --output "$tmp/v2.safetensors" \
  >"$tmp/export.log" 2>&1 || { cat "$tmp/export.log"; exit 1; }
train single4-resumed 1 4 1 1 1 --set checkpoint.load="$tmp/ckpt-111" \
  --set checkpoint.dir="$tmp/ckpt-single"
for resumed in pp2-v1-resumed single4-resumed; do
  /usr/bin/python3 - "$tmp/pp2-v2/metrics.jsonl" "$tmp/$resumed/metrics.jsonl" "$resumed" <<'PY'
import json, sys
load = lambda p: {j["iteration"]: j["loss"] for j in map(json.loads, open(p)) if j.get("split") == "train"}
a, b = load(sys.argv[1]), load(sys.argv[2])
its = sorted(b)
worst = max(abs(a[i] - b[i]) / abs(a[i]) for i in its)
print(f"{sys.argv[3]}: iterations {its[0]}-{its[-1]}, worst relative loss {worst:.2e}")
sys.exit(0 if its and its[0] == 11 and its[-1] == 20 and worst <= 1e-4 else 1)
PY
done
