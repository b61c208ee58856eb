#!/usr/bin/env bash
# End-to-end checks of mtnlg-generate and mtnlg-eval on a checkpoint trained here (configs/tiny.yaml
# on real text with GPT-2's vocabulary): greedy ids, text, JSON lines and standard input; the same
# tokens and loss after mtnlg-ckpt convert to tensor 2 x pipeline 2 (gathered on load); sampling
# fixed by --seed; and the exit status and message of each kind of bad input.
# Usage: tests/cmd/generate_cli_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/text_corpus.sh"
cd "$src" || exit 1

make_text_corpus "$1" "$tmp/c" || { echo "FAIL: mtnlg-preprocess"; exit 1; }
"$build/mtnlg-train" -c configs/tiny.yaml --set model.vocab_size=50257 \
  --set "data.blend=[{prefix: $tmp/c, weight: 1}]" --set "data.split=[8,1,1]" \
  --set "data.cache_dir=$tmp/cache" --set schedule.train_iters=6 --set eval.interval=3 \
  --set eval.iters=1 --set checkpoint.dir="$tmp/ckpt" --set checkpoint.save_interval=3 \
  --set logging.metrics_file="$tmp/metrics.jsonl" --log-level warn --threads 2 \
  || { echo "FAIL: training the checkpoint"; exit 1; }
"$build/mtnlg-ckpt" convert "$tmp/ckpt" --output "$tmp/tp2pp2" --layout 2,2,1 >/dev/null \
  || { echo "FAIL: mtnlg-ckpt convert"; exit 1; }
"$build/mtnlg-ckpt" export "$tmp/ckpt" --format hf-gpt2 --output "$tmp/hf/model.safetensors" \
  >/dev/null || { echo "FAIL: mtnlg-ckpt export"; exit 1; }

bin=$build/mtnlg-generate
expect 0 '^  --temperature FLOAT=1' -- --help
expect 0 '^  --output-format TEXT:\{text,ids,jsonl\}=text' -- --help
greedy=(--input-format ids --prompt "818 262 3726" --temperature 0 --max-new-tokens 12
  --output-format ids --threads 2)
a=$("$bin" --checkpoint "$tmp/ckpt" "${greedy[@]}")
b=$("$bin" --checkpoint "$tmp/tp2pp2" "${greedy[@]}")
check "greedy: up to 12 ids ($a)" test "$(wc -w <<<"$a")" -ge 1 -a "$(wc -w <<<"$a")" -le 12
check "tensor 2 x pipeline 2, gathered on load: the same ids" test "$a" == "$b"
c=$("$bin" --hf-model "$tmp/hf/model.safetensors" "${greedy[@]}")
check "exported to Hugging Face (config.json beside it): the same ids" test "$a" == "$c"
expect 0 '^\{"prompt": "In the beginning", "completion": ".*", "ids": \[[0-9, ]*\]\}$' -- \
  --checkpoint "$tmp/ckpt" --prompt "In the beginning" --temperature 0 --max-new-tokens 6 \
  --output-format jsonl
two=$(printf 'In the beginning\n\nthe earth was\n' | "$bin" --checkpoint "$tmp/ckpt" \
  --temperature 0 --max-new-tokens 4 --output-format ids)
check "standard input: one line per non-empty line" test "$(wc -l <<<"$two")" -eq 2
s1=$("$bin" --checkpoint "$tmp/ckpt" --prompt "the earth" --temperature 1.2 --top-k 50 --seed 5 \
  --max-new-tokens 10 --output-format ids --no-stop-at-eod)
s2=$("$bin" --checkpoint "$tmp/ckpt" --prompt "the earth" --temperature 1.2 --top-k 50 --seed 5 \
  --max-new-tokens 10 --output-format ids --no-stop-at-eod)
check "sampling: the same seed, the same 10 tokens ($s1)" test "$s1" == "$s2" -a "$(wc -w <<<"$s1")" -eq 10

expect 2 'name the weights once' -- --prompt x
expect 2 'name the weights once' -- --checkpoint "$tmp/ckpt" --hf-model "$tmp/m.safetensors" --prompt x
expect 4 'no committed checkpoint' -- --checkpoint "$tmp/none" --prompt x
expect 2 'top-p must be in \(0, 1\]' -- --checkpoint "$tmp/ckpt" --prompt x --top-p 1.5
# Negative counts and seeds are refused in words (not a 309-digit range).
expect 2 '^--threads: Value -5 must be 0 or more$' -- --checkpoint "$tmp/ckpt" --prompt x --threads=-5
expect 2 '^--seed: Value -1 must be 0 or more$' -- --checkpoint "$tmp/ckpt" --prompt x --seed=-1
expect 2 'exceed the model.s 32 positions.*--max-new-tokens' -- --checkpoint "$tmp/ckpt" \
  --prompt x --max-new-tokens 40
expect 2 'is not a token id' -- --checkpoint "$tmp/ckpt" --input-format ids --prompt "1 x"
expect 2 'outside the vocabulary' -- --checkpoint "$tmp/ckpt" --input-format ids --prompt "60000" \
  --max-new-tokens 4
expect 4 'config.json' -- --hf-model "$tmp/none/model.safetensors" --prompt x

bin=$build/mtnlg-eval
expect 0 '^  --split TEXT:\{valid,test\}=valid' -- --help
e1=$("$bin" --checkpoint "$tmp/ckpt" --split test --threads 2)
e2=$("$bin" --checkpoint "$tmp/tp2pp2" --split test --threads 2)
check "eval: a JSON line ($e1)" grep -Eq '^\{"split": "test", "loss": [0-9.]+, "ppl": [0-9.]+, "samples": 4, "tokens": 128\}$' <<<"$e1"
check "eval after convert: the same loss" test "$e1" == "$e2"
# The valid samples are the run's: the iteration-3 checkpoint scores what the run's first
# evaluation (after iteration 3) logged.
v=$("$bin" --checkpoint "$tmp/ckpt/iter_0000003" --split valid)
logged=$(grep '"split": "valid"' "$tmp/metrics.jsonl" | head -1)
check "eval valid at iteration 3 ($v) is the run's first valid loss ($logged)" /usr/bin/python3 -c "
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.exit(b['iteration'] != 3 or abs(a['loss'] - b['loss']) > 1e-9 * b['loss'])" "$v" "$logged"
expect 0 "^\{\"data\": \"$tmp/c\", \"loss\": " -- --checkpoint "$tmp/ckpt" --data "$tmp/c" --max-samples 5
expect 2 'split: .*not in \{valid,test\}' -- --checkpoint "$tmp/ckpt" --split dev
expect 2 'has no recipe' -- --hf-model "$tmp/hf/model.safetensors"
d1=$("$bin" --checkpoint "$tmp/ckpt" --data "$tmp/c")
d2=$("$bin" --hf-model "$tmp/hf/model.safetensors" --data "$tmp/c" --seq-length 32)
check "eval --data: a Hugging Face export scores what its checkpoint scores" test "$d1" == "$d2"
expect 4 'invalid JSON' -- --hf-model "$tmp/hf/model.safetensors" --hf-config configs/tiny.yaml \
  --data "$tmp/c"
expect 4 'no committed checkpoint' -- --checkpoint "$tmp/none"

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
