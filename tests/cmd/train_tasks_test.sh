#!/usr/bin/env bash
# eval.tasks_interval: a run scores its tasks every N iterations and logs them to the metrics
# file; each line equals what mtnlg-eval --tasks gives the checkpoint of that iteration (the same
# scorer on the same weights; a bf16 run's widened to fp32); a resumed run scores on at the next
# interval; with data ranks (2 processes under mpirun) the lines are one run's; a tensor 2 x
# pipeline 2 run scores through its own forward, as mtnlg-eval under mpirun; an fp16 run scores
# too; bad settings are named before training.
# Usage: tests/cmd/train_tasks_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/text_corpus.sh"
cd "$src" || exit 1

make_text_corpus "$build" "$tmp/c" || { echo "FAIL: mtnlg-preprocess"; exit 1; }
/usr/bin/python3 - "$tmp/tasks" <<'PY' || { echo "FAIL: writing the task files"; exit 1; }
import json, os, sys
words = "in the beginning God created the heaven and the earth and the earth was without form".split()
def phrase(i, n):
    return " ".join(words[(i * 5 + k) % len(words)] for k in range(n))
os.makedirs(os.path.join(sys.argv[1], "lambada_openai"))
with open(os.path.join(sys.argv[1], "lambada_openai", "test.jsonl"), "w") as f:
    for i in range(12):
        f.write(json.dumps({"text": phrase(i, 6 + i % 5)}) + "\n")
os.makedirs(os.path.join(sys.argv[1], "piqa"))
for split in ("validation", "train"):
    with open(os.path.join(sys.argv[1], "piqa", split + ".jsonl"), "w") as f:
        for i in range(10):
            f.write(json.dumps({"goal": phrase(i, 5) + "?", "sol1": phrase(i + 1, 3 + i % 4),
                                "sol2": phrase(i + 2, 2 + i % 3), "label": i % 2}) + "\n")
PY

bin=$build/mtnlg-train
common=(-c configs/tiny.yaml --set model.vocab_size=50257 --set "data.blend=[{prefix: $tmp/c, weight: 1}]"
  --set "data.split=[8,1,1]" --set eval.interval=0 --set checkpoint.save_interval=4
  --set "eval.tasks=[lambada_openai, piqa]" --set eval.tasks_interval=4
  --set "eval.task_dir=$tmp/tasks" --set eval.num_fewshot=1)
"$bin" "${common[@]}" --set schedule.train_iters=8 --set "data.cache_dir=$tmp/cache" \
  --set checkpoint.dir="$tmp/ckpt" --set logging.metrics_file="$tmp/metrics.jsonl" \
  --log-level warn --threads 2 >"$tmp/train.out" 2>&1
check "a run with eval.tasks_interval trains ($(tail -2 "$tmp/train.out" | tr '\n' ' '))" [ $? = 0 ]
check "two task lines at iterations 4 and 8" /usr/bin/python3 -c "
import json, sys
lines = [json.loads(l) for l in open('$tmp/metrics.jsonl')]
tasks = [(l['iteration'], l['task']) for l in lines if l.get('split') == 'tasks']
sys.exit(tasks != [(4, 'lambada_openai'), (4, 'piqa'), (8, 'lambada_openai'), (8, 'piqa')])"

# Each line is what mtnlg-eval --tasks scores on that iteration's checkpoint.
# equal_to_eval LABEL METRICS CKPT_ROOT IT [OTHER_METRICS]: the run's task lines at IT equal
# mtnlg-eval's on CKPT_ROOT's iteration IT (12 lambada documents, perplexity and acc_norm
# present); with OTHER_METRICS, its lambada perplexity also differs from that run's.
equal_to_eval() {
  local label=$1 metrics=$2 root=$3 it=$4 other=${5:-}
  "$build/mtnlg-eval" --checkpoint "$root/iter_000000$it" --tasks lambada_openai,piqa \
    --task-dir "$tmp/tasks" --num-fewshot 1 --threads 2 >"$tmp/eval.jsonl" 2>/dev/null
  check "$label, iteration $it: the metrics lines equal mtnlg-eval --tasks on its checkpoint" \
    /usr/bin/python3 -c "
import json, sys
def tasks(path):
    return [l for l in map(json.loads, open(path)) if l.get('split') == 'tasks' and l['iteration'] == $it]
ours, evals = tasks('$metrics'), [json.loads(l) for l in open('$tmp/eval.jsonl')]
keys = ('task', 'num_fewshot', 'documents', 'tokens', 'acc', 'acc_stderr', 'perplexity',
        'acc_norm', 'acc_norm_stderr')
ok = len(ours) == 2 and len(evals) == 2 and all(
    a.get(k) == b.get(k) for a, b in zip(ours, evals) for k in keys)
ok = ok and ours[0]['documents'] == 12 and 'perplexity' in ours[0] and 'acc_norm' in ours[1]
if '$other':
    ok = ok and ours[0]['perplexity'] != tasks('$other')[0]['perplexity']
sys.exit(0 if ok else 1)"
}
for it in 4 8; do equal_to_eval fp32 "$tmp/metrics.jsonl" "$tmp/ckpt" $it; done
# bf16: the live bf16 weights, widened into an fp32 copy before each scoring, are scored as
# mtnlg-eval scores the checkpoint's (the same lines, at both iterations: the copy is refreshed);
# bf16 training is not fp32 training, so its perplexity differs from the fp32 run's.
"$bin" "${common[@]}" --set schedule.train_iters=8 --set "data.cache_dir=$tmp/cache" \
  --set precision=bf16 --set checkpoint.dir="$tmp/ckpt-bf16" \
  --set logging.metrics_file="$tmp/m-bf16.jsonl" --log-level warn --threads 2 >"$tmp/bf16.out" 2>&1
check "a bf16 run with eval.tasks_interval trains ($(tail -2 "$tmp/bf16.out" | tr '\n' ' '))" [ $? = 0 ]
for it in 4 8; do equal_to_eval bf16 "$tmp/m-bf16.jsonl" "$tmp/ckpt-bf16" $it "$tmp/metrics.jsonl"; done
check "the log names the tasks" grep -q "tasks after iteration 4 (1-shot) | lambada_openai acc" \
  <("$bin" "${common[@]}" --set schedule.train_iters=4 --set "data.cache_dir=$tmp/cache" \
    --set checkpoint.dir="$tmp/ckpt-log" --set logging.metrics_file="$tmp/m-log.jsonl" \
    --log-level info --threads 2 2>&1)

# Resumed from iteration 4: the lines of iteration 8 come again, the same.
mkdir -p "$tmp/resume"
cp -r "$tmp/ckpt" "$tmp/resume/ckpt"
rm -rf "$tmp/resume/ckpt/iter_0000008"
printf '4\n' >"$tmp/resume/ckpt/latest_checkpointed_iteration.txt"
grep -v '"iteration": [5-8],' "$tmp/metrics.jsonl" >"$tmp/resume/metrics.jsonl"
"$bin" "${common[@]}" --set schedule.train_iters=8 --set "data.cache_dir=$tmp/cache" \
  --set checkpoint.dir="$tmp/resume/ckpt" --set logging.metrics_file="$tmp/resume/metrics.jsonl" \
  --set checkpoint.resume=true --log-level info --threads 2 >"$tmp/resume.out" 2>&1
check "the run resumed at iteration 4" grep -q "resum.*iteration 4\|continuing at iteration 5" "$tmp/resume.out"
check "resumed at 4: the task lines of 8 as the whole run's" /usr/bin/python3 -c "
import json, sys
def tasks(p):
    return [{k: v for k, v in json.loads(l).items() if k != 'seconds'} for l in open(p)
            if json.loads(l).get('split') == 'tasks']
sys.exit(tasks('$tmp/metrics.jsonl') != tasks('$tmp/resume/metrics.jsonl'))"

# Two data ranks: each scores (the same numbers), rank 0 writes them once.
if command -v mpirun >/dev/null; then
  mpirun --oversubscribe --allow-run-as-root -np 2 "$bin" "${common[@]}" --set schedule.train_iters=4 \
    --set "data.cache_dir=$tmp/cache2" --set checkpoint.dir="$tmp/ckpt2" \
    --set logging.metrics_file="$tmp/m2.jsonl" --set parallel.data=2 --log-level warn --threads 1 >"$tmp/dp.out" 2>&1
  check "2 data ranks: one pair of task lines ($(tail -2 "$tmp/dp.out" | tr '\n' ' '))" \
    /usr/bin/python3 -c "
import json, sys
t = [json.loads(l) for l in open('$tmp/m2.jsonl') if json.loads(l).get('split') == 'tasks']
sys.exit([x['task'] for x in t] != ['lambada_openai', 'piqa'] or t[0]['documents'] != 12)"
fi

# Tensor 2 x pipeline 2: the run's own model scores through the training forward, all four ranks
# taking part; its lines equal mtnlg-eval --tasks on its checkpoint in the same layout (the same
# scorer; other micro-batch shapes, so to float32 rounding; the same accuracies).
if command -v mpirun >/dev/null; then
  mpirun --bind-to none --oversubscribe --allow-run-as-root -np 4 "$bin" "${common[@]}" \
    --set schedule.train_iters=8 --set "data.cache_dir=$tmp/cache4" --set checkpoint.dir="$tmp/ckpt4" \
    --set logging.metrics_file="$tmp/m4.jsonl" --set parallel.tensor=2 --set parallel.pipeline=2 \
    --log-level warn --threads 1 >"$tmp/tp.out" 2>&1
  check "tensor 2 x pipeline 2 with eval.tasks_interval trains ($(tail -2 "$tmp/tp.out" | tr '\n' ' '))" [ $? = 0 ]
  # Scoring leaves training as it was: the same losses as the run without tasks.
  mpirun --bind-to none --oversubscribe --allow-run-as-root -np 4 "$bin" "${common[@]}" \
    --set schedule.train_iters=8 --set "data.cache_dir=$tmp/cache4" --set checkpoint.dir="$tmp/ckpt4n" \
    --set logging.metrics_file="$tmp/m4n.jsonl" --set parallel.tensor=2 --set parallel.pipeline=2 \
    --set eval.tasks_interval=0 --log-level warn --threads 1 >"$tmp/tpn.out" 2>&1
  check "tensor 2 x pipeline 2: the losses and grad norms with and without scoring are the same" \
    /usr/bin/python3 -c "
import json, sys
def steps(p):
    return [(l['iteration'], l['loss'], l['grad_norm']) for l in map(json.loads, open(p)) if 'grad_norm' in l]
a, b = steps('$tmp/m4.jsonl'), steps('$tmp/m4n.jsonl')
sys.exit(len(a) != 8 or a != b)"
  for it in 4 8; do
    mpirun --bind-to none --oversubscribe --allow-run-as-root -np 4 "$build/mtnlg-eval" \
      --checkpoint "$tmp/ckpt4/iter_000000$it" --tasks lambada_openai,piqa --task-dir "$tmp/tasks" \
      --num-fewshot 1 --threads 1 >"$tmp/eval4.jsonl" 2>"$tmp/eval4.err"
    check "tensor 2 x pipeline 2, iteration $it: the lines equal mtnlg-eval on its checkpoint under mpirun" \
      /usr/bin/python3 -c "
import json, sys
ours = [l for l in map(json.loads, open('$tmp/m4.jsonl')) if l.get('split') == 'tasks' and l['iteration'] == $it]
evals = [json.loads(l) for l in open('$tmp/eval4.jsonl')]
ok = len(ours) == 2 and len(evals) == 2 and ours[0]['documents'] == 12
for a, b in zip(ours, evals):
    for k in ('task', 'num_fewshot', 'documents', 'acc', 'acc_norm'):
        ok = ok and a.get(k) == b.get(k)
    for k in ('perplexity',):
        ok = ok and (k in a) == (k in b) and (k not in a or abs(a[k] - b[k]) <= 1e-5 * a[k])
sys.exit(0 if ok else 1)"
  done
fi
# fp16: scored by its own fp16 forward (no mtnlg-eval twin: the lines are there and finite).
"$bin" "${common[@]}" --set schedule.train_iters=4 --set "data.cache_dir=$tmp/cache" \
  --set precision=fp16 --set checkpoint.dir="$tmp/ckpt-fp16" \
  --set logging.metrics_file="$tmp/m-fp16.jsonl" --log-level warn --threads 2 >"$tmp/fp16.out" 2>&1
check "an fp16 run scores its tasks ($(tail -2 "$tmp/fp16.out" | tr '\n' ' '))" /usr/bin/python3 -c "
import json, math, sys
t = [json.loads(l) for l in open('$tmp/m-fp16.jsonl') if json.loads(l).get('split') == 'tasks']
sys.exit([x['task'] for x in t] != ['lambada_openai', 'piqa'] or not math.isfinite(t[0]['perplexity']))"

# Bad settings, named before any training.
bad=(-c configs/tiny.yaml --set model.vocab_size=50257 --set "data.blend=[{prefix: $tmp/c, weight: 1}]"
  --set "data.cache_dir=$tmp/cache" --set checkpoint.dir="$tmp/bad" --set eval.interval=0
  --set schedule.train_iters=2 --set logging.metrics_file="$tmp/bad.jsonl")
expect 2 "eval.tasks_interval is 4 but eval.tasks is empty" -- "${bad[@]}" \
  --set eval.tasks_interval=4 --set "eval.task_dir=$tmp/tasks"
expect 2 "eval.task_dir is not set" -- "${bad[@]}" --set eval.tasks_interval=4 \
  --set "eval.tasks=[piqa]"
expect 2 "\\[eval.tasks\\]: unknown task 'piqa2'" -- "${bad[@]}" --set eval.tasks_interval=4 \
  --set "eval.tasks=[piqa2]" --set "eval.task_dir=$tmp/tasks"
expect 4 "eval.task_dir: .*/none is not a directory" -- "${bad[@]}" --set eval.tasks_interval=4 \
  --set "eval.tasks=[piqa]" --set "eval.task_dir=$tmp/none"
expect 2 "eval.tasks_limit" -- "${bad[@]}" --set eval.tasks_limit=-1
expect 2 "expected a list of task names" -- "${bad[@]}" --set eval.tasks=piqa
echo "train_tasks: $passes passed, $failures failed"
[ "$failures" = 0 ]
