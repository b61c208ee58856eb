#!/usr/bin/env bash
# The GPU kit's end-to-end benchmark row, checked without a GPU: configs/1.3b.yaml with the kit's
# overrides (scripts/gpu/e2e_overrides.sh) is a valid recipe that trains 8 iterations with no
# evaluation and no checkpoint (here shrunk to a tiny model on the CPU, on a generated corpus);
# `report.py train-row` turns its metrics file into a benchmark line (medians of iterations 3-8,
# recomputed here) and refuses fewer than three iterations; `report.py bench` puts that line in
# the table with its MFU and plan, and the outside-the-allocator column for lines that carry it.
# Usage: tests/scripts/gpu_report_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
report=$src/scripts/gpu/report.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PYTHONDONTWRITEBYTECODE=1 # imports from scripts/ leave no __pycache__ in the source tree
source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh" # check, passes, failures
source "$src/scripts/gpu/e2e_overrides.sh"               # e2e_overrides
contains() { grep -Eq -- "$2" "$1"; }                    # contains FILE ERE

cd "$tmp" || exit 1
/usr/bin/python3 - "$src/scripts" "$tmp/corpus" <<'PY' || exit 1
import random, sys
sys.path.insert(0, sys.argv[1])
from prepare_demo_data import write_indexed_dataset
rng = random.Random(11)
write_indexed_dataset(sys.argv[2], [[rng.randrange(512) for _ in range(20 + rng.randrange(60))]
                                    for _ in range(300)])
PY

# The kit's run as it will be on the GPU, but for the model's size, the device and the data.
shrink=(--set model.num_layers=1 --set model.hidden_size=64 --set model.num_attention_heads=4
  --set model.ffn_hidden_size=256 --set model.seq_length=32 --set model.max_position_embeddings=32
  --set model.vocab_size=512 --set parallel.micro_batch_size=2)
"$build/mtnlg-train" --config "$src/configs/1.3b.yaml" --device cpu --threads 1 --log-level warn \
  "${e2e_overrides[@]}" "${shrink[@]}" --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" \
  --set "data.cache_dir=$tmp/cache" --set "logging.metrics_file=$tmp/metrics.jsonl" \
  >"$tmp/train.log" 2>&1
rc=$?
check "the kit's 1.3B run (shrunk, CPU) exits 0 (got $rc; $(tail -3 "$tmp/train.log"))" [ "$rc" = 0 ]
train_lines=$(grep -c '"split": "train"' "$tmp/metrics.jsonl" 2>/dev/null)
check "8 train iterations (got $train_lines)" [ "$train_lines" = 8 ]
check "no evaluation" bash -c "! grep -q '\"split\": \"valid\"' '$tmp/metrics.jsonl'"
check "no checkpoint written (checkpoint.dir=null)" [ ! -e "$tmp/checkpoints" ]
check "no mfu on a CPU (no datasheet peak), tflops_per_device still" \
  bash -c "! grep -q '\"mfu\"' '$tmp/metrics.jsonl' && grep -q '\"tflops_per_device\"' '$tmp/metrics.jsonl'"
check "global batch 64 (16 micro-batches of 4 at full size)" \
  contains "$tmp/metrics.jsonl" '"global_batch_size": 64'

# train-row: the medians of iterations 3-8, the most peak memory, the last loss.
/usr/bin/python3 "$report" train-row 1.3b-train bf16 "$tmp/metrics.jsonl" >"$tmp/row.json"
check "train-row exits 0" [ $? = 0 ]
/usr/bin/python3 - "$tmp/metrics.jsonl" "$tmp/row.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"split": "train"' in l][2:]
row = json.load(open(sys.argv[2]))
def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
want = {"impl": "mtnlg", "name": "1.3b-train", "precision": "bf16", "iterations": 6,
        "tokens_per_s": median(r["tokens_per_sec"] for r in rows),
        "tflops": median(r["tflops_per_device"] for r in rows),
        "ms_median": median(r["elapsed_ms"] for r in rows), "loss": rows[-1]["loss"]}
bad = {k: (row.get(k), v) for k, v in want.items() if row.get(k) != v}
if bad or row["peak_memory_bytes"] <= 0:
    sys.exit(f"train-row fields differ (got, want): {bad}, peak {row['peak_memory_bytes']}")
PY
check "train-row: medians of iterations 3-8, the last loss" [ $? = 0 ]
head -2 "$tmp/metrics.jsonl" >"$tmp/short.jsonl"
/usr/bin/python3 "$report" train-row x bf16 "$tmp/short.jsonl" >"$tmp/out" 2>&1
rc=$?
check "train-row on 2 iterations is exit 1 (got $rc)" [ "$rc" = 1 ]
check "train-row names the file and the count" contains "$tmp/out" "short.jsonl has 2 train iterations"

# bench: the row in the table, its MFU against the GEMM line, its plan; a bench-train line with
# the device figures gets the outside-the-allocator column (1.5 GiB in, 1 GiB reserved).
{
  echo '{"impl": "gemm", "ceiling_gflops": 100000}'
  cat "$tmp/row.json"
  echo '{"impl": "plan", "name": "1.3b-train", "memory_bytes": 3221225472}'
  echo '{"impl": "mtnlg", "name": "1.3b", "precision": "bf16", "tokens_per_s": 1000, "tflops": 50,' \
    '"ms_median": 10, "loss": 10, "peak_memory_bytes": 1073741824, "reserved_bytes": 1073741824,' \
    '"device_bytes_in_use": 1610612736, "host_waits_per_iter": 3, "launches_per_micro_batch": 412,' \
    '"optimizer_launches": 9}'
  echo '{"impl": "mtnlg", "name": "1.3b-train-blocked", "precision": "bf16", "tokens_per_s": 9,' \
    '"tflops": 60, "ms_median": 10, "loss": 10, "peak_memory_bytes": 1}'
} >"$tmp/results.jsonl"
/usr/bin/python3 "$report" bench "$tmp/results.jsonl" "$tmp/bench.json" >"$tmp/table" 2>&1
check "bench exits 0" [ $? = 0 ]
check "the table has the 1.3b-train row with its plan (3.00 GiB)" \
  contains "$tmp/table" "^1\.3b-train +mtnlg .* 3\.00 "
check "the 1.3b row: MFU 50.0% of the 100 TFLOP/s GEMM, 3 host waits, 412 launches a micro-batch, 9 an optimizer step, 0.50 GiB outside the allocator" \
  contains "$tmp/table" "^1\.3b +mtnlg .* 50\.0% .* 10\.0 +3 +412 +9 +0\.50$"
check "bench.json carries the rows" contains "$tmp/bench.json" '"model": "1.3b-train"'
check "the goal line: the best end-to-end row (60% of 100 TFLOP/s) against 50%" \
  contains "$tmp/table" "^1\.3B recipe end to end: best 1\.3b-train-blocked at 60\.0% .*2 rows; the goal, 50%: met"
check "bench.json names it" contains "$tmp/bench.json" '"e2e_best": "1.3b-train-blocked"'
grep -v '"1.3b-train-blocked"' "$tmp/results.jsonl" >"$tmp/slow.jsonl"
/usr/bin/python3 "$report" bench "$tmp/slow.jsonl" "$tmp/slow.json" >"$tmp/slow-table" 2>&1
check "below 50%: the goal line says not met" \
  contains "$tmp/slow-table" "best 1\.3b-train at .*1 rows; the goal, 50%: not met"

# MFU as the field states it: against the datasheet peak the rows carry (mtnlg-bench-train and
# the metrics' mfu: core/device_peak.h), beside the share of the GEMM rate; the goals' lines for
# GPT-2 124M (40%) and the 530B layer slice (50%, with the paper's 126 TFLOP/s per A100).
{
  echo '{"impl": "gemm", "ceiling_gflops": 800000}'
  echo '{"impl": "mtnlg", "name": "gpt2-124m", "precision": "bf16", "tokens_per_s": 1, "tflops": 300,' \
    '"ms_median": 1, "loss": 1, "peak_memory_bytes": 1, "peak_tflops": 1000, "mfu": 0.3}'
  echo '{"impl": "mtnlg", "name": "530b-layer-tp8", "precision": "bf16", "tokens_per_s": 1,' \
    '"tflops": 540, "ms_median": 1, "loss": 1, "peak_memory_bytes": 1, "peak_tflops": 1000,' \
    '"mfu": 0.54, "attention": "cudnn", "tensor_slice": 8}'
  echo '{"impl": "torch", "name": "gpt2-124m", "precision": "bf16", "tokens_per_s": 1, "tflops": 100,' \
    '"ms_median": 1, "loss": 1, "peak_memory_bytes": 1}'
} >"$tmp/mfu.jsonl"
/usr/bin/python3 "$report" bench "$tmp/mfu.jsonl" "$tmp/mfu.json" >"$tmp/mfu-table" 2>&1
check "bench with datasheet peaks exits 0 ($(tail -2 "$tmp/mfu-table"))" [ $? = 0 ]
check "the header names the datasheet peak" contains "$tmp/mfu-table" "datasheet dense bf16 peak: 1000 TFLOP/s"
check "gpt2-124m: MFU 30.0%, 37.5% of the GEMM rate" contains "$tmp/mfu-table" "^gpt2-124m +mtnlg .* 30\.0% +37\.5%"
check "PyTorch's row gets the same GPU's peak: 10.0%" contains "$tmp/mfu-table" "^gpt2-124m +torch .* 10\.0% "
check "the GPT-2 goal: 30.0% against 40%, not met" \
  contains "$tmp/mfu-table" "^GPT-2 124M step: gpt2-124m at 30\.0% MFU.*the goal, 40%: not met"
check "the 530B slice goal: 54.0% against 50%, met" \
  contains "$tmp/mfu-table" "^530B layer, one tensor rank of 8: 530b-layer-tp8 at 54\.0% MFU.*the goal, 50%: met"
check "the 530B slice against the paper's 126 TFLOP/s per A100 (4.29x), its attention named" \
  contains "$tmp/mfu-table" "530b-layer-tp8: attention cudnn, 540\.0 TFLOP/s = 4\.29x the paper"
check "bench.json carries the goals" contains "$tmp/mfu.json" '"goal": "GPT-2 124M step"'

# attention: ours against PyTorch's FA2 (impl torch) and cuDNN's (impl cudnn, where it ran as
# cuDNN), and the goal's line: our fastest forward and backward against cuDNN's.
row() {  # IMPL KERNELS RUNS NAME DROPOUT FWD_MS BWD_MS
  echo "{\"bench\": \"attention\", \"impl\": \"$1\", \"kernels\": \"$2\", \"runs\": \"$3\"," \
    "\"dtype\": \"bf16\", \"name\": \"$4\", \"dropout\": $5, \"fwd_ms\": $6, \"bwd_ms\": $7," \
    "\"fwd_tflops\": 1, \"bwd_tflops\": 1}"
}
{
  row torch sdpa flash 1.3b 0 0.4 1.0
  row cudnn sdpa cudnn 1.3b 0 0.2 0.5
  row mtnlg flash2 flash2 1.3b 0 0.5 1.1
  row mtnlg blocked blocked 1.3b 0 1.0 2.0
  row cudnn sdpa sdpa 530b-tp8 0 0.1 0.1  # cuDNN refused it: no anchor
  row mtnlg flash2 flash2 530b-tp8 0 0.2 0.4
} >"$tmp/attention.jsonl"
/usr/bin/python3 "$report" attention "$tmp/attention.jsonl" "$tmp/attention.json" >"$tmp/att" 2>&1
check "attention exits 0 ($(tail -2 "$tmp/att"))" [ $? = 0 ]
check "flash2 on 1.3b: torch/ours 0.80 and 0.91, cudnn/ours 0.40 and 0.45" \
  contains "$tmp/att" "^1\\.3b +0 mtnlg +flash2 .* 0\\.80 +0\\.91 +0\\.87 +0\\.40 +0\\.45 +0\\.44$"
check "the goal's line: 0.40x and 0.45x cuDNN's speed, not met" \
  contains "$tmp/att" "^against cuDNN, 1\.3b dropout 0: our best forward 0\.40x, backward 0\.45x.*not met"
check "no cuDNN anchor where cuDNN did not run" bash -c "! grep -q 'against cuDNN, 530b-tp8' '$tmp/att'"

# The plan row check.sh writes for 1.3b-train: the full-size recipe with the same overrides.
"$build/mtnlg-train" --config "$src/configs/1.3b.yaml" --dry-run --no-data-check --json --world-size 1 \
  "${e2e_overrides[@]}" >"$tmp/plan.json" 2>"$tmp/plan.err"
rc=$?
check "the 1.3b-train plan: --dry-run exits 0 (got $rc: $(tail -2 "$tmp/plan.err"))" [ "$rc" = 0 ]
check "the 1.3b-train plan has the memory total" contains "$tmp/plan.json" '"memory_per_rank_bytes": \{'

echo "gpu_report: $passes passed, $failures failed"
[ "$failures" = 0 ]
