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

train_text_checkpoint "$build" "$tmp" 6 --set eval.interval=3 --set eval.iters=1 \
  --set checkpoint.save_interval=3 || exit 1
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
# bf16 and fp16 (the cache on the backend's device, the causal kernel over it): they run, and
# their greedy continuations start as the fp32 one (a tiny model's logits are far apart).
for dt in bf16 fp16; do
  n=$("$bin" --checkpoint "$tmp/ckpt" "${greedy[@]}" --dtype "$dt" --device cpu --log-level info \
    2>"$tmp/gen-$dt.err")
  check "--dtype $dt: greedy ids ($n), the first as fp32's" \
    test "$(wc -w <<<"$n")" -ge 1 -a "${n%% *}" == "${a%% *}"
  check "--dtype $dt: the log says where and how fast" \
    grep -q "generating on cpu in $dt" "$tmp/gen-$dt.err"
done
check "--dtype bf16 from a Hugging Face file too" \
  test -n "$("$bin" --hf-model "$tmp/hf/model.safetensors" "${greedy[@]}" --dtype bf16)"
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" = 0 ]; then  # no GPU here: exit 3, named
  expect 3 'cuda' -- --checkpoint "$tmp/ckpt" "${greedy[@]}" --device cuda
fi
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

# The tokenizer travels: the checkpoint, its reshard and the Hugging Face export carry GPT-2's
# files byte for byte (checksummed in the manifest), and the tools find them from anywhere.
it=$tmp/ckpt/iter_0000006
check "the checkpoint carries tokenizer/vocab.json (encoder.json) and merges.txt (vocab.bpe)" \
  bash -c "cmp -s data/gpt2/encoder.json $it/tokenizer/vocab.json && cmp -s data/gpt2/vocab.bpe \
    $it/tokenizer/merges.txt && cmp -s $it/tokenizer/vocab.json $tmp/tp2pp2/iter_0000006/tokenizer/vocab.json"
check "the manifest lists the tokenizer's three files" test "$(grep -c '"name": "tokenizer/' "$it/manifest.json")" -eq 3
check "the Hugging Face export is a whole model directory" /usr/bin/python3 -c "
import json, os, sys
d = sys.argv[1]
c = json.load(open(d + '/tokenizer_config.json'))
sys.exit(not (c['tokenizer_class'] == 'GPT2Tokenizer' and c['eos_token'] == '<|endoftext|>' and
              c['model_max_length'] == json.load(open(d + '/config.json'))['n_positions'] and
              open(d + '/vocab.json', 'rb').read() == open('data/gpt2/encoder.json', 'rb').read() and
              open(d + '/merges.txt', 'rb').read() == open('data/gpt2/vocab.bpe', 'rb').read()))" "$tmp/hf"
check "mtnlg-ckpt verify checks the tokenizer's files" "$build/mtnlg-ckpt" verify "$it"
cp -r "$it" "$tmp/damaged" && echo x >>"$tmp/damaged/tokenizer/merges.txt"
out=$("$build/mtnlg-ckpt" verify "$tmp/damaged" 2>&1)
check "a damaged tokenizer file fails verify (exit 4) naming it" \
  bash -c "[[ $? == 4 ]] && grep -q 'damaged/tokenizer/merges.txt' <<<'$out'"
text_here=$("$bin" --checkpoint "$tmp/ckpt" --prompt "In the beginning" --temperature 0 --max-new-tokens 6)
text_away=$(cd / && "$bin" --checkpoint "$tmp/ckpt" --prompt "In the beginning" --temperature 0 \
  --max-new-tokens 6 2>&1)
check "from another directory the checkpoint's own tokenizer is used ($text_away)" test "$text_here" == "$text_away"
hf_away=$(cd / && "$bin" --hf-model "$tmp/hf/model.safetensors" --prompt "In the beginning" \
  --temperature 0 --max-new-tokens 6 2>&1)
check "and beside an export ($hf_away)" test "$text_here" == "$hf_away"
rm -r "$tmp/tp2pp2/iter_0000006/tokenizer"
out=$(cd / && "$bin" --checkpoint "$tmp/tp2pp2" --prompt x 2>&1)
check "a checkpoint without a tokenizer, away from data/gpt2: --vocab-file named ($out)" \
  grep -q -- "--vocab-file is required: the model carries no tokenizer" <<<"$out"
# A prompt of invalid UTF-8 still gives JSON lines (U+FFFD, as Python's errors="replace").
bad=$("$bin" --checkpoint "$tmp/ckpt" --prompt $'caf\xc3 \xff ok' --temperature 0 --max-new-tokens 3 \
  --output-format jsonl)
check "jsonl of an invalid UTF-8 prompt is JSON ($bad)" /usr/bin/python3 -c "
import json, sys; o = json.loads(sys.argv[1]); sys.exit(o['prompt'] != 'caf\ufffd \ufffd ok')" "$bad"

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
e4=$("$bin" --checkpoint "$tmp/ckpt" --split test --threads 2 --device cpu --dtype bf16)
check "eval in bf16: the loss within 2% of fp32's ($e4)" /usr/bin/python3 -c "
import json, sys
a, b = json.loads('$e1'), json.loads('$e4')
sys.exit(not (a['loss'] != b['loss'] and abs(a['loss'] - b['loss']) <= 0.02 * a['loss']))"
e3=$("$bin" --checkpoint "$tmp/ckpt" --split test --threads 2 --micro-batch 1000000000000000000)
check "a huge --micro-batch is the whole split in one forward, sized first: the same loss ($e3)" \
  /usr/bin/python3 -c "
import json, sys; a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.exit(abs(a['loss'] - b['loss']) > 1e-6 * a['loss'] or a['samples'] != b['samples'])" "$e1" "$e3"
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
