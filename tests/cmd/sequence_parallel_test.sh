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
train tp2-sp 2 2 1 1 --set parallel.sequence_parallel=true --set checkpoint.dir="$tmp/ckpt" \
  --set checkpoint.save_interval=10
train tp2-pp2-dp2-sp-zero1 8 2 2 1 --set parallel.sequence_parallel=true \
  --set parallel.zero_stage=1
train tp2-pp2-sp-ckpt 4 2 2 1 --set parallel.sequence_parallel=true \
  --set parallel.activation_checkpointing=true
train tp2-sp-mb2 2 2 1 2 --set parallel.sequence_parallel=true

/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" single:tp2-sp single:tp2-pp2-dp2-sp-zero1 \
  single:tp2-pp2-sp-ckpt single-mb2:tp2-sp-mb2

# Its iteration-10 checkpoint evaluates on one rank (tensor 1, where sequence parallelism is off,
# as in Megatron-LM) to the run's first valid loss (the same samples), and converts to tensor 1.
"$1/mtnlg-eval" --checkpoint "$tmp/ckpt/iter_0000010" --threads 1 --set data.cache_dir="$tmp/cache" \
  >"$tmp/eval.json"
"$1/mtnlg-ckpt" convert "$tmp/ckpt" --output "$tmp/ckpt-tp1" --layout 1,1,1 >/dev/null
/usr/bin/python3 - "$tmp/eval.json" "$tmp/tp2-sp/metrics.jsonl" <<'PY'
import json, sys
got = json.loads(open(sys.argv[1]).read())["loss"]
valid = [json.loads(l) for l in open(sys.argv[2]) if '"split": "valid"' in l]
want = valid[0]["loss"]
print(f"mtnlg-eval on the sequence-parallel checkpoint: loss {got}, the run's first valid loss {want}")
sys.exit(0 if abs(got - want) <= 1e-5 * abs(want) else 1)
PY

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
  /usr/bin/python3 tests/cmd/check_plan.py "$tmp/$name"
done

# Memory: (2,2,1) with 4 layers, with and without sequence parallelism (and each with activation
# checkpointing). Every rank's measured peak must equal its stage's plan to the byte, and the peak
# without sequence parallelism minus the peak with it must equal the saving written out here from
# the shapes (an independent count: n = b*s token rows, r = n/tp of them per rank under sequence
# parallelism, d = n - r rows no longer held):
#   per micro-batch in flight: the residual stream (L+1 tensors [rows, h]), and per saved layer
#     ln1_out, h1, ln2_out [rows, h] and four LayerNorm statistics [rows] (fp32); the last stage's
#     final LayerNorm statistics (2 x [rows])
#   once: the backward scratch dh, dln and dres [rows, h], the pipeline receive buffers [rows, h]
#     per neighbour, a checkpointed run's recompute buffer (one layer's saved tensors)
#   minus what sequence parallelism adds: the gathered and partial buffers [n, h] and the
#     LayerNorm gradients [2h].
for ckpt in false true; do
  for sp in false true; do
    name=memory-sp$sp-ckpt$ckpt
    mpirun --bind-to none --oversubscribe --allow-run-as-root -np 4 "$bin" --config configs/tiny.yaml \
      --threads 1 --log-level info --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" \
      --set data.cache_dir="$tmp/cache" --set schedule.train_iters=2 --set model.num_layers=4 \
      --set batch.global_batch_size=8 --set parallel.micro_batch_size=1 --set parallel.tensor=2 \
      --set parallel.pipeline=2 --set parallel.sequence_parallel=$sp \
      --set parallel.activation_checkpointing=$ckpt \
      --set logging.metrics_file="$tmp/$name/metrics.jsonl" >"$tmp/$name.log" 2>&1
  done
  /usr/bin/python3 - "$tmp/memory-spfalse-ckpt$ckpt.log" "$tmp/memory-sptrue-ckpt$ckpt.log" "$ckpt" <<'PY'
import re, sys
pat = re.compile(r"\[rank (\d+)\].*memory after the first iteration: peak .* \((\S+)%; (\d+) B, (\d+) B\)")
def peaks(path):
    out = {}
    for line in open(path):
        m = pat.search(line)
        if m:
            out[int(m.group(1))] = (int(m.group(3)), int(m.group(4)))
    if len(out) != 4:
        sys.exit(f"{path}: {len(out)} of 4 ranks logged their memory")
    return out
without, with_sp = peaks(sys.argv[1]), peaks(sys.argv[2])
ckpt = sys.argv[3] == "true"
b, s, h, tp, pp, layers, m_micro, e = 1, 32, 64, 2, 2, 4, 8, 4
n = b * s; r = n // tp; d = n - r; L = layers // pp
ok = True
for rank in range(4):
    stage = rank // tp  # ranks are tensor-fastest: (tp, pp) = (rank % 2, rank // 2)
    first, last = stage == 0, stage == pp - 1
    in_flight = min(pp - stage, m_micro)
    neighbours = (stage > 0) + (stage < pp - 1)
    layer_saved = 3 * d * h * e + 4 * d * 4
    per_micro = (L + 1) * d * h * e + (0 if ckpt else L * layer_saved) + (2 * d * 4 if last else 0)
    saving = (in_flight * per_micro + 3 * d * h * e + neighbours * d * h * e
              + (layer_saved if ckpt else 0) - (2 * n * h * e + 2 * h * 4))
    measured_sp, planned_sp = with_sp[rank]
    measured, planned = without[rank]
    got = measured - measured_sp
    print(f"checkpointing {ckpt}, rank {rank} (stage {stage}): peak {measured} B without, "
          f"{measured_sp} B with sequence parallelism (planned {planned_sp} B): saved {got} B, "
          f"predicted {saving} B")
    ok = ok and measured_sp == planned_sp and measured == planned and got == saving
sys.exit(0 if ok else 1)
PY
done
