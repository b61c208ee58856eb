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
    '"device_bytes_in_use": 1610612736}'
  echo '{"impl": "mtnlg", "name": "1.3b-train-blocked", "precision": "bf16", "tokens_per_s": 9,' \
    '"tflops": 60, "ms_median": 10, "loss": 10, "peak_memory_bytes": 1}'
} >"$tmp/results.jsonl"
/usr/bin/python3 "$report" bench "$tmp/results.jsonl" "$tmp/bench.json" >"$tmp/table" 2>&1
check "bench exits 0" [ $? = 0 ]
check "the table has the 1.3b-train row with its plan (3.00 GiB)" \
  contains "$tmp/table" "^1\.3b-train +mtnlg .* 3\.00 "
check "the 1.3b row: MFU 50.0% of the 100 TFLOP/s GEMM, 0.50 GiB outside the allocator" \
  contains "$tmp/table" "^1\.3b +mtnlg .* 50\.0% .* 0\.50$"
check "bench.json carries the rows" contains "$tmp/bench.json" '"model": "1.3b-train"'
check "the goal line: the best end-to-end row (60% of 100 TFLOP/s) against 50%" \
  contains "$tmp/table" "^1\.3B recipe end to end: best 1\.3b-train-blocked at 60\.0% .*2 rows; the goal, 50%: met"
check "bench.json names it" contains "$tmp/bench.json" '"e2e_best": "1.3b-train-blocked"'
grep -v '"1.3b-train-blocked"' "$tmp/results.jsonl" >"$tmp/slow.jsonl"
/usr/bin/python3 "$report" bench "$tmp/slow.jsonl" "$tmp/slow.json" >"$tmp/slow-table" 2>&1
check "below 50%: the goal line says not met" \
  contains "$tmp/slow-table" "best 1\.3b-train at .*1 rows; the goal, 50%: not met"

# The plan row check.sh writes for 1.3b-train: the full-size recipe with the same overrides.
"$build/mtnlg-train" --config "$src/configs/1.3b.yaml" --dry-run --json --world-size 1 \
  "${e2e_overrides[@]}" >"$tmp/plan.json" 2>"$tmp/plan.err"
rc=$?
check "the 1.3b-train plan: --dry-run exits 0 (got $rc: $(tail -2 "$tmp/plan.err"))" [ "$rc" = 0 ]
check "the 1.3b-train plan has the memory total" contains "$tmp/plan.json" '"memory_per_rank_bytes": \{'

echo "gpu_report: $passes passed, $failures failed"
[ "$failures" = 0 ]
