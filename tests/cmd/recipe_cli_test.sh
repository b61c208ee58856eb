#!/usr/bin/env bash
# End-to-end checks of mtnlg-recipe from-megatron: --help, a Megatron command line turned into a
# recipe that mtnlg-train plans and trains, and the exit status and message of bad input.
# Usage: tests/cmd/recipe_cli_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
bin=$1/mtnlg-recipe
train=$1/mtnlg-train
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh"

cd "$src" || exit 1
expect 0 'from-megatron +Turn the arguments of a Megatron-LM' -- --help
expect 0 '^  -o,--output TEXT +Write the recipe here' -- from-megatron --help
expect 2 'A subcommand is required' --

/usr/bin/python3 tests/cmd/make_tiny_corpus.py "$tmp/corpus" 200 512
megatron=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
  --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 3
  --lr 1e-3 --lr-warmup-iters 1 --data-path "$tmp/corpus" --split 1,0,0 --eval-interval 0
  --data-cache-path "$tmp/cache" --log-interval 1 --use-flash-attn --swiglu)
# --swiglu has no recipe key: no recipe without --allow-dropped (exit 3, naming it).
expect 3 'would not do what these flags do: --swiglu: no recipe key does this.*--allow-dropped' -- \
  from-megatron -o "$tmp/tiny.yaml" --set model.vocab_size=512 -- "${megatron[@]}"
check "no recipe written on exit 3" test ! -e "$tmp/tiny.yaml"
expect 0 'wrote .*tiny.yaml' -- from-megatron -o "$tmp/tiny.yaml" --allow-dropped \
  --set "logging.metrics_file=$tmp/run/metrics.jsonl" --set model.vocab_size=512 -- "${megatron[@]}"
if grep -q '^#   --swiglu: no recipe key does this' "$tmp/tiny.yaml" &&
  grep -q '^#   --use-flash-attn: the same attention math' "$tmp/tiny.yaml"; then
  echo "ok: the recipe names what it does not carry over"; passes=$((passes + 1))
else
  echo "FAIL: the recipe's header:"; head -12 "$tmp/tiny.yaml"; failures=$((failures + 1))
fi
# On standard output the recipe alone (it parses); each flag left out is also said on stderr.
"$bin" from-megatron --allow-dropped --set model.vocab_size=512 -- "${megatron[@]}" \
  >"$tmp/stdout.yaml" 2>"$tmp/stderr.txt"
check "to stdout: the recipe alone, the dropped flag on stderr" bash -c "
  head -1 '$tmp/stdout.yaml' | grep -q '^# Converted by mtnlg-recipe from-megatron' &&
  ! grep -q '\[warning\]\|\[info\]' '$tmp/stdout.yaml' &&
  grep -q 'warning.*not carried over: --swiglu: no recipe key does this' '$tmp/stderr.txt' &&
  ! grep -q 'not carried over' '$tmp/stdout.yaml'"
# The recipe trains: 3 iterations, 3 metrics lines.
if "$train" --config "$tmp/tiny.yaml" --threads 1 --log-level warn &&
  [[ $(grep -c '"split": "train"' "$tmp/run/metrics.jsonl") -eq 3 ]]; then
  echo "ok: mtnlg-train trains the converted recipe"; passes=$((passes + 1))
else
  echo "FAIL: mtnlg-train on the converted recipe"; failures=$((failures + 1))
fi
# Paths stay as written: relative ones relative (resolved against the working directory where the
# recipe runs, as in Megatron-LM), absolute ones absolute, and what derives from them alike.
(cd "$tmp" && "$bin" from-megatron --allow-dropped --set model.vocab_size=512 -- \
  "${megatron[@]}" --save ckpt/run1 --load ckpt/run1 --tensorboard-dir tb/run1 \
  --vocab-file /abs/gpt2/encoder.json --merge-file gpt2/vocab.bpe) >"$tmp/paths.yaml" 2>/dev/null
check "relative paths stay relative, absolute ones absolute" bash -c "
  grep -q '^  dir: \"ckpt/run1\"\$' '$tmp/paths.yaml' &&
  grep -q '^  tensorboard_dir: \"tb/run1\"\$' '$tmp/paths.yaml' &&
  grep -q '^  metrics_file: \"tb/run1/metrics.jsonl\"\$' '$tmp/paths.yaml' &&
  grep -q '^  vocab_file: \"/abs/gpt2/encoder.json\"\$' '$tmp/paths.yaml' &&
  grep -q '^  merge_file: \"gpt2/vocab.bpe\"\$' '$tmp/paths.yaml' &&
  grep -q '^    - prefix: \"$tmp/corpus\"\$' '$tmp/paths.yaml'"

# Bad input: a required key the command line lacks names the Megatron flag; bad values name
# theirs; an unwritable output is exit 4 and leaves nothing behind.
expect 2 'data\.blend.*--data-path' -- from-megatron -- --num-layers 2 --hidden-size 64 \
  --num-attention-heads 4 --seq-length 32 --micro-batch-size 1 --global-batch-size 1 --lr 1e-3 --train-iters 1
expect 2 'num_attention_heads.*--num-attention-heads' -- from-megatron -- "${megatron[@]}" --num-attention-heads 5
expect 2 '\[--lr-decay-iters\]: --lr-decay-iters x is not an integer' -- from-megatron -- "${megatron[@]}" --lr-decay-iters x
# A flag no Megatron defines fails as argparse fails it, with the likeliest one meant.
expect 2 'unrecognized argument --lr-decay-stlye .*did you mean --lr-decay-style\?' -- \
  from-megatron -- "${megatron[@]}" --lr-decay-stlye cosine
expect 2 'unrecognized argument --foo-bar' -- from-megatron -- "${megatron[@]}" --foo-bar 3
expect 2 'ARGS is required' -- from-megatron
expect 4 "$tmp/no/such/r.yaml" -- from-megatron -o "$tmp/no/such/r.yaml" --allow-dropped -- \
  "${megatron[@]}"
if [[ -z $(find "$tmp" -name '*.tmp') ]]; then
  echo "ok: no temporary file left"; passes=$((passes + 1))
else
  echo "FAIL: a temporary file was left"; failures=$((failures + 1))
fi

# to-megatron: a recipe as pretrain_gpt.py's arguments, which from-megatron reads back.
expect 0 '^  CONFIG TEXT:FILE REQUIRED +The recipe' -- to-megatron --help
expect 0 '^--num-layers 24 \\$' -- to-megatron configs/1.3b.yaml
expect 0 'note: schedule.warmup_tokens 375000000: 183105 samples' -- to-megatron configs/1.3b.yaml
"$bin" to-megatron configs/1.3b.yaml >"$tmp/args.txt" 2>/dev/null
args=$(tr -d '\\\n' <"$tmp/args.txt")
# shellcheck disable=SC2086  # the printed words, split as a shell would
expect 0 'wrote .*back.yaml' -- from-megatron -o "$tmp/back.yaml" -- $args
check "the recipe back: the 1.3B model, its batch and schedule" bash -c "
  grep -q 'num_layers: 24' '$tmp/back.yaml' && grep -q 'global_batch_size: 512' '$tmp/back.yaml' &&
  grep -q 'decay_style: cosine' '$tmp/back.yaml'"
expect 3 'model.vocab_size 512: Megatron takes the vocabulary from its tokenizer.*--allow-dropped' -- \
  to-megatron configs/tiny.yaml
expect 0 'not expressible: data.shuffle false' -- to-megatron --allow-dropped configs/tiny.yaml
expect 2 'nowhere.yaml' -- to-megatron "$tmp/nowhere.yaml"

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
