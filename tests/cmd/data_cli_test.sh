#!/usr/bin/env bash
# End-to-end checks of mtnlg-data: --help, `samples` on a real recipe in both formats, and the
# exit status and message of each kind of bad input.
# Usage: tests/cmd/data_cli_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
bin=$1/mtnlg-data
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/text_corpus.sh"

cd "$src" || exit 1
expect 0 'samples +Print samples \[start, start \+ count\)' -- --help
expect 0 '^  --count INT:POSITIVE REQUIRED' -- samples --help
expect 0 '^  --split TEXT:\{train,valid,test\}=train' -- samples --help
expect 0 '^  --format TEXT:\{ids,text\}=ids' -- samples --help
expect 0 '^  --log-level TEXT=warn' -- --help
expect 2 'A subcommand is required' --

# A corpus of real text: the tokenizer's own test documents through mtnlg-preprocess.
make_text_corpus "$1" "$tmp/c" || { echo "FAIL: mtnlg-preprocess"; exit 1; }
sets=(--set "data.blend=[{prefix: $tmp/c, weight: 1}]" --set data.split=[1,0,0]
  --set "data.cache_dir=$tmp/cache" --set data.shuffle=true --set schedule.train_iters=20
  --set model.vocab_size=50257)
recipe=configs/tiny.yaml

# ids: --count lines of seq_length + 1 = 33 ids.
out=$("$bin" samples -c $recipe "${sets[@]}" --count 5)
if [[ $? -eq 0 && $(wc -l <<<"$out") -eq 5 && $(head -1 <<<"$out" | wc -w) -eq 33 ]]; then
  echo "ok: 5 lines of 33 ids"; passes=$((passes + 1))
else
  echo "FAIL: ids output:"; echo "$out" | head; failures=$((failures + 1))
fi
# --start pages through the same stream.
page=$("$bin" samples -c $recipe "${sets[@]}" --start 2 --count 3)
if [[ "$page" == "$(sed -n 3,5p <<<"$out")" ]]; then
  echo "ok: --start 2 --count 3 is lines 3-5"; passes=$((passes + 1))
else
  echo "FAIL: --start 2 --count 3 differs from lines 3-5"; failures=$((failures + 1))
fi
# text: JSON strings of the decoded words (vocabulary found in data/gpt2 from the repo root).
expect 0 '^"[a-zA-Z .\\n<|>]*(earth|heaven|created)' -- samples -c $recipe "${sets[@]}" --count 3 --format text

# Bad input: exit 2 naming the flag or key, 4 for a missing file.
expect 2 '--count is required' -- samples -c $recipe "${sets[@]}"
# The trainer's token check: GPT-2 ids in a recipe of 512 tokens are refused, as mtnlg-train does.
expect 2 'is not below model.vocab_size 512' -- samples -c $recipe "${sets[@]}" \
  --set model.vocab_size=512 --count 1
expect 2 'split: .*not in \{train,valid,test\}' -- samples -c $recipe "${sets[@]}" --count 1 --split dev
expect 2 '\[--start\]: .*passes the end of the train samples this recipe reads \(80\)' -- \
  samples -c $recipe "${sets[@]}" --start 80 --count 1
expect 2 'eval.interval' -- samples -c $recipe "${sets[@]}" --set eval.interval=0 --split valid --count 1
expect 2 'eval.iters' -- samples -c $recipe "${sets[@]}" --set eval.iters=0 --split test --count 1
expect 2 'data.split' -- samples -c $recipe "${sets[@]}" --set eval.iters=2 --split test --count 1
expect 4 "$tmp/missing" -- samples -c $recipe --set "data.blend=[{prefix: $tmp/missing, weight: 1}]" --count 1
expect 4 'nowhere.json' -- samples -c $recipe "${sets[@]}" --count 1 --format text --vocab-file "$tmp/nowhere.json"

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
