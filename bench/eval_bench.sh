#!/usr/bin/env bash
# Evaluation's speed against the training forward's, side by side in one run on this machine:
# one model (configs/demo-cpu.yaml's shape with GPT-2's vocabulary, a few iterations trained here
# on generated English), the training forward's tokens/s (mtnlg-eval's loss mode over a
# .bin/.idx, micro-batches of --micro-batch) and the tasks' (mtnlg-eval --tasks on generated
# LAMBADA- and PIQA-style documents: the tokens the model ran, contexts shared by choices counted
# once), and their ratio (issue 33's goal: >= 90% on the CPU); then the same tasks through the
# training forward (--scorer stage: what a GPU and several ranks run), its padded rows counted.
# Usage: bench/eval_bench.sh BUILD_DIR [--docs N] [--threads T] [--shape demo|gpt2]
#   (defaults 200, all cores, demo). gpt2: GPT-2 small's shape (12 x 768, 12 heads, 1024
#   positions) on LAMBADA-style documents of 600-800 words (the window nearly full), N/8 of them.
# Prints a table; the figures of record are in docs/evaluation.md with their dates.
set -euo pipefail
build=$(cd "${1:?usage: bench/eval_bench.sh BUILD_DIR [--docs N] [--threads T]}" && pwd)
shift
docs=200
threads=0
shape=demo
while (($#)); do
  case "$1" in
    --docs) docs=$2; shift ;;
    --threads) threads=$2; shift ;;
    --shape) shape=$2; shift ;;
    *) echo "eval_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src"
py=/usr/bin/python3
case "$shape" in
  demo) model=(); lo=40; hi=90; corpus_words=(80 300); samples=256; task_docs=$docs ;;
  gpt2) model=(--set model.num_layers=12 --set model.hidden_size=768 --set model.num_attention_heads=12
          --set model.seq_length=1024 --set parallel.micro_batch_size=1 --set batch.global_batch_size=1)
        lo=600; hi=800; corpus_words=(600 1200); samples=8; task_docs=$((docs / 8)) ;;
  *) echo "eval_bench.sh: --shape is demo or gpt2, not '$shape'" >&2; exit 2 ;;
esac
echo "eval_bench: $(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), shape $shape"

$py - "$tmp" "$task_docs" "$lo" "$hi" "${corpus_words[@]}" <<'PY'
import json, os, random, sys
tmp, n, lo, hi, clo, chi = sys.argv[1], *map(int, sys.argv[2:7])
rnd = random.Random(7)
words = ("the of and to in a is that for it as was with be by on not he this are or his from at "
         "which but have an they you were her she there been one all we their has would when if "
         "so no will can more other what some them into could time only about then its also two "
         "first new people may like over such years way well even because any these most after "
         "work made many before must through back where much your should good long world year").split()
def text(k):
    return " ".join(rnd.choice(words) for _ in range(k))
with open(os.path.join(tmp, "corpus.jsonl"), "w") as f:
    for _ in range(400):
        f.write(json.dumps({"text": text(rnd.randint(clo, chi)) + "."}) + "\n")
os.makedirs(os.path.join(tmp, "tasks", "lambada_openai"))
with open(os.path.join(tmp, "tasks", "lambada_openai", "test.jsonl"), "w") as f:
    for _ in range(n):
        f.write(json.dumps({"text": text(rnd.randint(lo, hi))}) + "\n")
os.makedirs(os.path.join(tmp, "tasks", "piqa"))
for split in ("validation", "train"):
    with open(os.path.join(tmp, "tasks", "piqa", split + ".jsonl"), "w") as f:
        for i in range(n):
            f.write(json.dumps({"goal": text(12) + "?", "sol1": text(rnd.randint(5, 20)) + ".",
                                "sol2": text(rnd.randint(5, 20)) + ".", "label": i % 2}) + "\n")
PY
"$build/mtnlg-preprocess" --input "$tmp/corpus.jsonl" --output-prefix "$tmp/corpus" --append-eod \
  --log-level warn >/dev/null
"$build/mtnlg-train" -c configs/demo-cpu.yaml "${model[@]}" --set schedule.train_iters=2 --set schedule.warmup_tokens=0 \
  --set eval.interval=0 \
  --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set "data.cache_dir=$tmp/cache" \
  --set checkpoint.dir="$tmp/ckpt" --set checkpoint.save_interval=2 \
  --set logging.metrics_file="$tmp/metrics.jsonl" --log-level warn --threads "$threads" >/dev/null

# The loss mode's time comes on stderr ("scored N tokens in S s"), its JSON line staying the same.
"$build/mtnlg-eval" --checkpoint "$tmp/ckpt" --data "$tmp/corpus" --max-samples "$samples" \
  --micro-batch 4 --threads "$threads" --log-level info >/dev/null 2>"$tmp/fwd.log"
fwd=$(grep -o 'scored [0-9]* tokens in [0-9.]* s' "$tmp/fwd.log" | awk '{print $2, $5}')
tasks=$("$build/mtnlg-eval" --checkpoint "$tmp/ckpt" --tasks lambada_openai,piqa \
  --task-dir "$tmp/tasks" --num-fewshot 0 --bootstrap-iters 0 --threads "$threads" 2>/dev/null)
# The same tasks through the training forward (the GPU's and several ranks' scorer), in one
# process here: its tokens are the rows it ran, padding included.
stage=$("$build/mtnlg-eval" --checkpoint "$tmp/ckpt" --tasks lambada_openai,piqa --scorer stage \
  --task-dir "$tmp/tasks" --num-fewshot 0 --bootstrap-iters 0 --threads "$threads" 2>/dev/null)
$py - "$fwd" "$tasks" "$samples samples" "$stage" <<'PY'
import json, sys
tokens, seconds = sys.argv[1].split()
fwd = {"tokens": int(tokens), "seconds": float(seconds)}
rate = fwd["tokens"] / fwd["seconds"]
print(f"\n{'what':<56} {'tokens':>10} {'seconds':>9} {'tokens/s':>10} {'of forward':>10}")
print(f"{'training forward (loss mode, ' + sys.argv[3] + ')':<56} {fwd['tokens']:>10} {fwd['seconds']:>9.2f} "
      f"{rate:>10.0f} {'100%':>10}")
for lines, how in ((sys.argv[2], ""), (sys.argv[4], ", --scorer stage")):
    for line in lines.splitlines():
        t = json.loads(line)
        r = t["tokens"] / t["seconds"]
        name = f"--tasks {t['task']} ({t['documents']} documents{how})"
        print(f"{name:<56} {t['tokens']:>10} {t['seconds']:>9.2f} {r:>10.0f} {100 * r / rate:>9.1f}%")
PY
