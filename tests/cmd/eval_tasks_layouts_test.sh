#!/usr/bin/env bash
# mtnlg-eval --tasks on several ranks and on the training forward: a checkpoint trained in one
# process and the same checkpoint resharded to (2, 2, 1) give the same numbers from the packed
# rows (one process), from the training forward (--scorer stage) in one process, under mpirun with
# the checkpoint's own layout (tensor 2 x pipeline 2), with data ranks (4 replicas), and with
# pipeline 2 x data 2 asked for (--pipeline): every request's log-likelihood to float32 rounding,
# its greedy flag, every accuracy; bf16 stays near; bad placements named.
# Usage: tests/cmd/eval_tasks_layouts_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/text_corpus.sh"
cd "$src" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

train_text_checkpoint "$build" "$tmp" 8 || exit 1
"$build/mtnlg-ckpt" convert "$tmp/ckpt" --output "$tmp/ckpt221" --layout 2,2,1 >/dev/null ||
  { echo "FAIL: mtnlg-ckpt convert"; exit 1; }
/usr/bin/python3 tests/cmd/make_task_files.py "$tmp/tasks" || { echo "FAIL: writing the task files"; exit 1; }

bin=$build/mtnlg-eval
mpi=(mpirun --bind-to none --oversubscribe --allow-run-as-root)
# score NAME [LAUNCHER...] -- ARGS: the few-shot tasks 0- and 2-shot, then wikitext, into
# $tmp/NAME.{jsonl,samples,wikitext.*}.
score() {
  local name=$1
  shift
  local launch=()
  while [ "$1" != -- ]; do launch+=("$1"); shift; done
  shift
  "${launch[@]}" "$bin" "$@" --tasks lambada_openai,piqa,winogrande,race,hellaswag \
    --task-dir "$tmp/tasks" --num-fewshot 0,2 --batch-size 2 --bootstrap-iters 0 \
    --log-samples "$tmp/$name.samples" >"$tmp/$name.jsonl" 2>"$tmp/$name.err" &&
  "${launch[@]}" "$bin" "$@" --tasks wikitext --task-dir "$tmp/tasks" --batch-size 2 \
    --log-samples "$tmp/$name.wikitext.samples" >"$tmp/$name.wikitext.jsonl" 2>>"$tmp/$name.err"
  check "$name scores the tasks ($(grep -v '^\s*$' "$tmp/$name.err" | grep -iv info | tail -2 | tr '\n' ' '))" [ $? = 0 ]
}
score rows -- --checkpoint "$tmp/ckpt" --threads 2
score stage -- --checkpoint "$tmp/ckpt" --threads 2 --scorer stage
score tp2pp2 "${mpi[@]}" -np 4 -- --checkpoint "$tmp/ckpt221" --threads 1 --log-level info
score dp4 "${mpi[@]}" -np 4 -- --checkpoint "$tmp/ckpt" --threads 1
score pp2dp2 "${mpi[@]}" -np 4 -- --checkpoint "$tmp/ckpt221" --threads 1 --tensor 1 --pipeline 2
score bf16 -- --checkpoint "$tmp/ckpt" --threads 2 --dtype bf16
check "under mpirun the checkpoint's own layout: tensor 2, pipeline 2, one replica" \
  grep -q "tensor 2, pipeline 2, 1 replica" "$tmp/tp2pp2.err"

# same A B TOLERANCE (tests/cmd/compare_task_samples.py): the same requests with
# log-likelihoods within TOLERANCE (relative), the same greedy flags, the same accuracies.
same() { /usr/bin/python3 tests/cmd/compare_task_samples.py "$tmp" "$@"; }
check "the training forward in one process equals the packed rows" same rows stage 1e-5
check "tensor 2 x pipeline 2 under mpirun (the resharded checkpoint) equals one process" same rows tp2pp2 1e-5
check "four data-parallel replicas equal one process" same rows dp4 1e-5
check "pipeline 2 x data 2 asked for (resharded on load) equals one process" same rows pp2dp2 1e-5
check "bf16 stays within 5% of fp32" same rows bf16 0.05
check "one rank writes: the task lines once" [ "$(wc -l <"$tmp/tp2pp2.jsonl")" = 10 ]

# Bad placements, named.
expect 2 "--scorer rows runs the whole float32 model .* bf16" -- --checkpoint "$tmp/ckpt" \
  --tasks piqa --task-dir "$tmp/tasks" --scorer rows --dtype bf16
expect 2 "--scorer goes with --tasks" -- --checkpoint "$tmp/ckpt" --scorer stage
expect 2 "--tensor goes with --tasks" -- --checkpoint "$tmp/ckpt" --tensor 2
expect 2 "--tensor 2 x --pipeline 1 ranks a model copy do not divide the job's 1 ranks" -- \
  --checkpoint "$tmp/ckpt" --tasks piqa --task-dir "$tmp/tasks" --tensor 2
out=$("${mpi[@]}" -np 3 "$bin" --checkpoint "$tmp/ckpt" --tasks piqa --task-dir "$tmp/tasks" \
  --tensor 3 --threads 1 2>&1)
check "--tensor 3 for a model of 4 heads is named ($(echo "$out" | grep -m1 -i error | cut -c1-160))" \
  grep -q "parallel.tensor.*3\|3.*parallel.tensor" <<<"$out"
"$build/mtnlg-ckpt" export "$tmp/ckpt" --format hf-gpt2 --output "$tmp/hf/model.safetensors" >/dev/null
out=$("${mpi[@]}" -np 3 "$bin" --hf-model "$tmp/hf/model.safetensors" --tasks piqa \
  --task-dir "$tmp/tasks" --tensor 3 --threads 1 2>&1)
check "--tensor 3 for a Hugging Face model of 4 heads is named ($(echo "$out" | grep -m1 -i error | cut -c1-160))" \
  grep -q "invalid argument \[--tensor\]: tensor 3 does not divide the 4 heads" <<<"$out"
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" = 0 ]; then  # no GPU here: exit 3, named
  expect 3 "cuda" -- --checkpoint "$tmp/ckpt" --tasks piqa --task-dir "$tmp/tasks" --device cuda
fi
echo "eval_tasks_layouts: $passes passed, $failures failed"
[ "$failures" = 0 ]
