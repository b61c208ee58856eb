#!/usr/bin/env bash
# model.init_from under every parallel layout: a GPT-2 checkpoint in Hugging Face's layout
# (written by make_tiny_gpt2.py, not by our exporter) loaded by one process, tp 2, pp 2 and
# tp 2 x pp 2 (each rank its shard of its stage) must train to the same loss and grad norm at
# every iteration, within the float32 tolerance of dp_train_test.sh. Vocabulary 500 is padded to
# 512 (256 per tensor rank at tp 2), so the padded rows are exercised. (That the import itself is
# right is tests/checkpoint/gpt_vs_torch_test.cc's job; this checks every layout loads alike.)
# So that an init_from ignored in every layout cannot pass, the single process's first loss must
# also differ from the same recipe's without init_from (its own random initialization).
# Usage: tests/cmd/init_from_train_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2" 500
/usr/bin/python3 tests/cmd/make_tiny_gpt2.py "$tmp/gpt2.safetensors" 2 64 500 32

train() {  # NAME NP TP PP [INIT_FROM]
  local name=$1 np=$2 tp=$3 pp=$4 from=${5-$tmp/gpt2.safetensors}
  run_layout "$name" "$np" --set "data.split=[1,0,0]" --set model.vocab_size=500 \
    --set model.max_position_embeddings=32 --set model.hidden_dropout=0 \
    --set model.attention_dropout=0 --set model.init_from="$from" \
    --set schedule.train_iters=10 --set parallel.micro_batch_size=1 \
    --set batch.global_batch_size=4 --set parallel.tensor="$tp" --set parallel.pipeline="$pp"
}

train single 1 1 1
train tp2 2 2 1
train pp2 2 1 2
train tp2-pp2 4 2 2

train scratch 1 1 1 ""

/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" single:tp2 single:pp2 single:tp2-pp2
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
first = lambda n: json.loads(open(f"{sys.argv[1]}/{n}/metrics.jsonl").readline())["loss"]
a, b = first("single"), first("scratch")
print(f"first loss from the GPT-2 file {a:.6f}, from a random initialization {b:.6f}")
sys.exit(0 if abs(a - b) > 1e-3 * abs(b) else 1)
PY
