#!/usr/bin/env bash
# End-to-end checks of the mtnlg-train command line: --help, --dry-run on the paper's recipe,
# and the exit status and message of each kind of bad input.
# Usage: tests/cmd/cli_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
bin=$1/mtnlg-train
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh"

cd "$src" || exit 1
# --help: each option with its type, default and a description (not just its name, which CLI11
# prints whatever we register), and the exit statuses of the README's table.
expect 0 '^  -c,--config TEXT REQUIRED +Recipe YAML file' -- --help
expect 0 '^  --set TEXT \.\.\. +Override a recipe key: --set key\.path=value' -- --help
expect 0 '^  --dry-run +Validate the recipe and print its plan' -- --help
expect 0 '^  --threads INT:NONNEGATIVE +CPU threads' -- --help
expect 0 '^  --log-level TEXT=info +trace, debug, info, warn, error or off' -- --help
expect 0 '^  --version +Display program version' -- --help
expect 0 '0 done; 2 bad command line or recipe; 3 not yet supported by this build; 4 missing or corrupt' -- --help
expect 0 '75 stopped by SIGTERM, SIGUSR1 or SIGINT .*128\+N stopped by signal N .*1 a diverged run' -- --help
expect 0 '^mtnlg-train [0-9]+\.[0-9]+\.[0-9]+$' -- --version
# Every MTNLG_ environment variable the code reads is in the --help of mtnlg-train or of the tool
# it serves (mtnlg-ckpt: MTNLG_SCRIPTS_DIR), found in the sources so that a new one cannot be left
# out (the internal re-exec marker aside; test seams are not read by the tools).
help_text="$("$bin" --help) $("$1/mtnlg-ckpt" --help)"
for var in $(grep -rhoE '"MTNLG_[A-Z_]+"' core cmd parallel model data optim checkpoint |
  tr -d '"' | sort -u | grep -vE '^MTNLG_OPENMP_REEXEC$'); do
  check "mtnlg-train or mtnlg-ckpt --help mentions $var (read in the sources)" grep -q -- "$var" <<<"$help_text"
done
# The paper's model: about 530B parameters (529.6B with the padded vocabulary).
expect 0 'parameters +5(2[5-9]|3[0-4])[0-9]{9} ' -- --config configs/530b.yaml --dry-run --no-data-check
expect 0 '8 x 35 x 8 = 2240 ranks' -- --config configs/530b.yaml --dry-run --no-data-check
# Parameter counts from the model's shape, computed here: L (12 h^2 + 13 h) + V_pad h + P h + 2 h
# (tied LM head once; V padded to a multiple of 128 x tensor).
params() { echo $(($1 * (12 * $2 * $2 + 13 * $2) + $3 * $2 + $4 * $2 + 2 * $2)); }
expect 0 "parameters +$(params 4 256 50304 128) \(16\.07M" -- --config configs/demo-cpu.yaml --dry-run --no-data-check
expect 0 'micro-batch +4, m = 2 micro-batches' -- --config configs/demo-cpu.yaml --dry-run --no-data-check
expect 0 'iterations +300 \(307\.20K tokens\)' -- --config configs/demo-cpu.yaml --dry-run --no-data-check
# 10,000 layers plan at once (the parameter registry's lookups are O(1); a linear scan made this
# quadratic: minutes): 10,000 x 49,984 + 34,816 (embeddings) + 128 (final LayerNorm).
expect 0 'parameters +499874944 ' -- --config configs/tiny.yaml --dry-run --no-data-check --set model.num_layers=10000
# A FIFO where a file belongs is refused before open() could block waiting for a writer: the
# recipe, a dataset's .idx and .bin, and model.init_from (exit 4, naming it).
mkfifo "$tmp/fifo.yaml" "$tmp/fifo.safetensors" "$tmp/ds.idx" "$tmp/ds.bin"
expect 4 "fifo\.yaml\]: not a regular file \(it is a FIFO\)" -- --config "$tmp/fifo.yaml"
/usr/bin/python3 tests/cmd/make_tiny_corpus.py "$tmp/good" 20 512 >/dev/null
cp "$tmp/good.bin" "$tmp/half.bin" && mkfifo "$tmp/half.idx"
for prefix in ds half; do
  expect 4 "$prefix\.(idx|bin)\]: not a regular file \(it is a FIFO\)" -- --config configs/tiny.yaml \
    --set "data.blend=[{prefix: $tmp/$prefix, weight: 1}]" --set data.cache_dir="$tmp/cache"
done
expect 4 "fifo\.safetensors\]: not a regular file \(it is a FIFO\)" -- --config configs/tiny.yaml \
  --set "data.blend=[{prefix: $tmp/good, weight: 1}]" --set data.cache_dir="$tmp/cache" \
  --set model.init_from="$tmp/fifo.safetensors" --set logging.metrics_file="$tmp/m/metrics.jsonl"
# A diverged run is the run failing, not bad input: exit 1 (the README's table), naming the key.
expect 1 'diverged \[optimizer\.lr\]: training diverged at iteration [0-9]+' -- --config configs/tiny.yaml \
  --set "data.blend=[{prefix: $tmp/good, weight: 1}]" --set data.cache_dir="$tmp/cache" \
  --set optimizer.lr=1e30 --set optimizer.weight_decay=0 --set optimizer.clip_grad=0 --set schedule.warmup_tokens=0 \
  --set logging.metrics_file="$tmp/dv/m.jsonl"
# Non-finite from the first iteration, before any update: the initial weights are blamed.
expect 1 'diverged \[model\.init_method_std\]: the first iteration' -- --config configs/tiny.yaml \
  --set "data.blend=[{prefix: $tmp/good, weight: 1}]" --set data.cache_dir="$tmp/cache" \
  --set model.init_method_std=1e308 --set logging.metrics_file="$tmp/dv2/m.jsonl"
# Checkpoints off in one try: every setting that needs checkpoint.dir is named at once, with the
# --set that turns each off (it took one error per key).
expect 2 'checkpoint.dir is not set but checkpoint.save_interval is 1000; checkpoint.resume is true.*--set checkpoint.save_interval=0 --set checkpoint.resume=false' -- \
  --config configs/530b.yaml --dry-run --no-data-check --set 'checkpoint.dir=""'
expect 0 'recipe is valid' -- --config configs/530b.yaml --dry-run --no-data-check \
  --set 'checkpoint.dir=""' --set checkpoint.save_interval=0 --set checkpoint.resume=false
# --dry-run opens the data (caught before a job queues): a missing prefix is exit 4 naming its
# blend entry and the way to plan without it; a present one is counted in the plan.
expect 4 'data\.blend\[0\]: no such file.*mtnlg-preprocess.*--no-data-check plans without the data' -- \
  --config configs/530b.yaml --dry-run
expect 4 'data\.blend\[1\]: ' -- --config configs/tiny.yaml --dry-run \
  --set "data.blend=[{prefix: $tmp/good, weight: 1}, {prefix: $tmp/absent, weight: 1}]"
expect 0 "^  $tmp/good  weight 1, 20 documents, [0-9]+ tokens" -- --config configs/tiny.yaml --dry-run \
  --set "data.blend=[{prefix: $tmp/good, weight: 1}]"
expect 0 '"data": \[\{"prefix": "[^"]*/good", "weight": 1, "documents": 20, "tokens": [0-9]+\}\]' -- \
  --config configs/tiny.yaml --dry-run --json --set "data.blend=[{prefix: $tmp/good, weight: 1}]"
expect 0 '"data": null' -- --config configs/530b.yaml --dry-run --no-data-check --json
expect 0 '^  --no-data-check Needs: --dry-run$' -- --help
two=(--config configs/tiny.yaml --set "data.blend=[{prefix: $tmp/good, weight: 1}]"
  --set data.cache_dir="$tmp/cache" --set schedule.train_iters=2 --set schedule.warmup_tokens=0
  --set logging.metrics_file="$tmp/r/m.jsonl")
# A model larger than the machine's memory is refused before it is allocated (exit 2 naming the
# key of its largest term), not SIGKILLed by the OOM killer minutes later: 2,000 layers of hidden
# 2048 plan to ~1.5 TiB. Under mpirun the ranks of a node are summed and all fail alike.
big=(--config configs/tiny.yaml --set "data.blend=[{prefix: $tmp/good, weight: 1}]"
  --set data.cache_dir="$tmp/cache" --set model.num_layers=2000 --set model.hidden_size=2048
  --set model.ffn_hidden_size=8192 --set logging.metrics_file="$tmp/big/m.jsonl")
expect 2 'invalid argument \[parallel\.zero_stage\]: not enough memory: this process needs [0-9.]+ GiB by the plan \([0-9]+ bytes, most of it adam_moments' -- "${big[@]}"
if command -v mpirun >/dev/null; then
  out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
    mpirun --allow-run-as-root --oversubscribe -np 2 bash -c '"$@"; echo "rank $PMIX_RANK exit $?"' \
    _ "$bin" "${big[@]/$tmp\/big/$tmp/big2}" 2>&1)
  if [[ $(grep -c "the 2 ranks on node 0 need" <<<"$out") == 2 ]] && grep -q "^rank 0 exit 2$" <<<"$out" &&
    grep -q "^rank 1 exit 2$" <<<"$out"; then
    echo "ok: 2 ranks too large for their node both exit 2 naming the node"
    passes=$((passes + 1))
  else
    echo "FAIL: 2 ranks too large for their node: $(tail -5 <<<"$out")"
    failures=$((failures + 1))
  fi
fi
# The data indices grow with the run: one too long for the machine's memory is refused before
# they are built, naming the key that sized them (train split: the run's length; valid: eval.iters).
expect 2 'invalid argument \[schedule\.train_iters\]: not enough memory for the sample indices of documents \[0, [0-9]+\) of .*good \(4000000[0-9]{4} samples' -- "${two[@]:0:6}" \
  --set schedule.train_iters=10000000000 --set logging.metrics_file="$tmp/long/m.jsonl"
expect 2 'invalid argument \[eval\.iters\]: not enough memory .* lower eval\.iters or raise eval\.interval' -- "${two[@]:0:6}" \
  --set "data.split=[9,1,0]" --set eval.interval=1 --set eval.iters=1000000000 --set logging.metrics_file="$tmp/long/m.jsonl"
# A fresh run over an earlier run's metrics file says that it replaces them.
expect 0 'done: 2 iterations' -- "${two[@]}"
expect 0 'm\.jsonl holds [0-9]+ bytes from an earlier run; this fresh run replaces them' -- "${two[@]}"
# Metrics to a device: the resolved recipe goes to the working directory, not beside it in /dev.
rm -f /dev/resolved_recipe.yaml
abs_bin=$(cd "$(dirname "$bin")" && pwd)/mtnlg-train abs_src=$(pwd)
if (cd "$tmp" && timeout 60 "$abs_bin" "${two[@]/configs\/tiny.yaml/$abs_src/configs/tiny.yaml}" \
  --set logging.metrics_file=/dev/null >/dev/null 2>&1) && [[ -s $tmp/resolved_recipe.yaml ]] &&
  [[ ! -e /dev/resolved_recipe.yaml ]]; then
  echo "ok: metrics to /dev/null, resolved recipe in the working directory"
  passes=$((passes + 1))
else
  echo "FAIL: metrics to /dev/null: no $tmp/resolved_recipe.yaml, or one in /dev"
  failures=$((failures + 1))
fi
# A dataset file (.bin or .idx) truncated while a run has it mapped: not a bare SIGBUS (exit
# 135) but exit 4 naming the file. (The run would go on for 100,000 iterations: timeout kills it
# after 90 s, which fails the case.)
for ext in bin idx; do
  /usr/bin/python3 tests/cmd/make_tiny_corpus.py "$tmp/shrink-$ext" 400 512 >/dev/null
  timeout -s KILL 90 "$bin" --config configs/tiny.yaml --set "data.blend=[{prefix: $tmp/shrink-$ext, weight: 1}]" \
    --set data.cache_dir="$tmp/cache" --set schedule.train_iters=100000 --threads 1 \
    --set logging.metrics_file="$tmp/shrink-run-$ext/m.jsonl" >"$tmp/shrink-$ext.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    [[ -s $tmp/shrink-run-$ext/m.jsonl ]] && break
    sleep 0.1
  done
  truncate -s 0 "$tmp/shrink-$ext.$ext"
  status=0
  wait "$pid" || status=$?
  if [[ $status == 4 ]] && grep -q "shrink-$ext\.$ext\]: the file changed size" "$tmp/shrink-$ext.log"; then
    echo "ok: a dataset's .$ext truncated during training: exit 4 naming it"
    passes=$((passes + 1))
  else
    echo "FAIL: a dataset's .$ext truncated during training: exit $status: $(tail -2 "$tmp/shrink-$ext.log")"
    failures=$((failures + 1))
  fi
done
# A rank under mpirun writes to a pseudo-terminal even when mpirun's output is piped: no ANSI
# colour codes in its log lines.
if command -v mpirun >/dev/null; then
  out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 \
    mpirun --allow-run-as-root -np 1 "$bin" --config "$tmp/missing.yaml" 2>&1 | cat)
  if grep -q $'\e\[' <<<"$out" || ! grep -q 'missing\.yaml' <<<"$out"; then
    echo "FAIL: colour codes (or no error) in a rank's log under mpirun: $(cat -v <<<"$out" | head -3)"
    failures=$((failures + 1))
  else
    echo "ok: no colour codes under mpirun"
    passes=$((passes + 1))
  fi
fi
# The planner reads the attention kernels' switch as the CUDA backend does: a misspelling is an
# error naming the variable, in --dry-run too (it was planned as the default without a word).
MTNLG_CUDA_ATTENTION=Flash expect 2 'invalid argument \[MTNLG_CUDA_ATTENTION\]: MTNLG_CUDA_ATTENTION=Flash is not one of cudnn, flash2, blocked, flash2-fwd, flash2-bwd' -- --config configs/1.3b.yaml --dry-run --no-data-check
# The first FA-style kernels were removed (2026-11-27): naming them is the same error.
MTNLG_CUDA_ATTENTION=flash expect 2 'MTNLG_CUDA_ATTENTION=flash is not one of cudnn, flash2, blocked' -- --config configs/1.3b.yaml --dry-run --no-data-check
# The recipe names them (model.attention_backend), --dry-run says what runs; the variable wins.
expect 0 'attention kernels on the GPU: blocked; model.attention_backend chooses' -- \
  --config configs/1.3b.yaml --dry-run --no-data-check --set model.attention_backend=blocked
MTNLG_CUDA_ATTENTION=flash2 expect 0 'attention kernels on the GPU: flash2 \(dq from stored dS\)' -- \
  --config configs/1.3b.yaml --dry-run --no-data-check --set model.attention_backend=blocked
expect 2 'model.attention_backend.*auto, cudnn, flash2, blocked' -- \
  --config configs/1.3b.yaml --dry-run --no-data-check --set model.attention_backend=flash
# So are the switches that do not change the plan: every one the CUDA backend reads.
MTNLG_CUDA_EPILOGUES=yes expect 2 'MTNLG_CUDA_EPILOGUES=yes is not one of on, off' -- --config configs/1.3b.yaml --dry-run --no-data-check
MTNLG_CUDA_FLASH2_ROWS=96 expect 2 'MTNLG_CUDA_FLASH2_ROWS=96 is not one of 64, 128' -- --config configs/1.3b.yaml --dry-run --no-data-check
MTNLG_CUDA_FLASH2_DQ=stores expect 2 'MTNLG_CUDA_FLASH2_DQ=stores is not one of auto, stored, recompute' -- --config configs/1.3b.yaml --dry-run --no-data-check
expect 2 'world-size: Value 99999999999999999999 not in range' -- --config configs/tiny.yaml --dry-run --no-data-check --world-size 99999999999999999999
# NaN and infinities are not numbers a plan can use (CLI11's range checks let NaN through).
for flag in --iteration-time --peak-tflops --gpu-memory-gb --utilization; do
  expect 2 "$flag: 'nan' is not a finite number" -- --config configs/530b.yaml --dry-run --no-data-check "$flag" nan
done
# Finite but impossible: more than 1e5 TFLOP/s per GPU is a unit typo, not a plan to print.
expect 2 'invalid argument \[--iteration-time\]: --iteration-time 1e-300 s would mean inf TFLOP/s per GPU' -- --config configs/530b.yaml --dry-run --no-data-check --iteration-time 1e-300
expect 2 'invalid argument \[--peak-tflops\]: --peak-tflops 1e\+300 is more than 1e5 TFLOP/s per GPU' -- --config configs/530b.yaml --dry-run --no-data-check --peak-tflops 1e300
expect 2 "--iteration-time: 'inf' is not a finite number" -- --config configs/530b.yaml --dry-run --no-data-check --iteration-time inf
expect 0 '^  --world-size INT:INT in \[1 - 1099511627776\] Needs: --dry-run' -- --help
expect 0 '^  --json Needs: --dry-run +With --dry-run: print the plan as one JSON object' -- --help
expect 0 '^  --gpu-memory-gb FLOAT:POSITIVE Needs: --dry-run' -- --help
expect 0 '^  --gpu TEXT:\{a100,h100,h200\}=a100 Needs: --dry-run' -- --help
# The days to train by default (A100), another GPU by name, and exit 5 for a plan that does not fit.
expect 0 'days to train +48\.1 at 312 peak TFLOP/s \(A100 bf16/fp16\) x 0\.4' -- --config configs/530b.yaml --dry-run --no-data-check --world-size 2240
expect 0 'days to train +15\.2 at 989 peak TFLOP/s \(H100 bf16/fp16\)' -- --config configs/530b.yaml --dry-run --no-data-check --world-size 2240 --gpu h100
expect 0 'needs [0-9.]+ of 141\.00 GiB' -- --config configs/530b.yaml --dry-run --no-data-check --gpu h200
expect 5 'the plan does not fit: its worst rank needs more than 10 GiB \(exit 5' -- --config configs/530b.yaml --dry-run --no-data-check --gpu-memory-gb 10
expect 5 '"fits": false' -- --config configs/530b.yaml --dry-run --no-data-check --gpu-memory-gb 10 --json
expect 2 "--gpu: gtx480 not in \{a100,h100,h200\}" -- --config configs/530b.yaml --dry-run --no-data-check --gpu gtx480
expect 0 '^  --iteration-time FLOAT:POSITIVE Needs: --dry-run' -- --help
expect 0 '^  --peak-tflops FLOAT:POSITIVE Needs: --dry-run' -- --help
expect 0 '^  --utilization FLOAT:FRACTION=0\.4 Needs: --dry-run' -- --help
# The paper's TFLOP/s per GPU (126, 121, 113) from its iteration times.
expect 0 'TFLOP/s per GPU +125\.7 ' -- --config configs/530b.yaml --dry-run --no-data-check --world-size 2240 --iteration-time 60.1
expect 0 'TFLOP/s per GPU +120\.4 ' -- --config configs/530b.yaml --dry-run --no-data-check --world-size 2800 --iteration-time 50.2
expect 0 'TFLOP/s per GPU +113\.5 ' -- --config configs/530b.yaml --dry-run --no-data-check --world-size 3360 --iteration-time 44.4
expect 0 '^\{"parameters": 529600819200,.*"fits": true' -- --config configs/530b.yaml --dry-run --no-data-check --world-size 2240 --json
expect 5 'DOES NOT FIT: the worst rank \(stage 0\)' -- --config configs/530b.yaml --dry-run --no-data-check --gpu-memory-gb 16
expect 2 'world-size 2000 is not a multiple of .* = 280' -- --config configs/530b.yaml --dry-run --no-data-check --world-size 2000
expect 2 'requires --dry-run' -- --config configs/tiny.yaml --json
expect 0 "parameters +$(params 12 768 50304 1024) \(124\.48M" -- --config configs/gpt2-124m.yaml --dry-run --no-data-check
expect 0 "parameters +$(params 24 2048 50304 2048) \(1\.32B" -- --config configs/1.3b.yaml --dry-run --no-data-check
expect 0 "parameters +$(params 72 3072 51200 1024) \(8\.32B" -- --config configs/8.3b.yaml --dry-run --no-data-check
expect 0 '8 x 1 x 64 = 512 ranks' -- --config configs/8.3b.yaml --dry-run --no-data-check
# Bad input: the key path and the fix are named, with the documented exit status.
expect 2 'model\.num_atention_heads' -- --config configs/tiny.yaml --set model.num_atention_heads=4 --dry-run --no-data-check
expect 2 'model\.num_attention_heads: 100 does not divide model\.hidden_size' -- --config configs/530b.yaml --set model.num_attention_heads=100 --dry-run --no-data-check
expect 2 'KEY\.PATH=VALUE' -- --config configs/tiny.yaml --set model.hidden_size --dry-run --no-data-check
expect 2 '^--config is required$' -- --dry-run
expect 2 '^The following argument was not expected: --no-such-flag$' -- --config configs/tiny.yaml --no-such-flag
expect 4 'nonexistent\.yaml' -- --config "$tmp/nonexistent.yaml"
# Tensor parallelism trains, but one process cannot hold 2 tensor ranks.
expect 2 'world size 1 is not a multiple of parallel\.tensor x parallel\.pipeline = 2 x 1' -- --config configs/tiny.yaml --set parallel.tensor=2
# The interleaved schedule's layout rules name the key and the fix (exit 2).
expect 2 'parallel.virtual_pipeline.*model.num_layers: 2 does not divide into parallel.pipeline 2 x parallel.virtual_pipeline 2' -- --config configs/tiny.yaml --set parallel.pipeline=2 --set parallel.virtual_pipeline=2
expect 2 'parallel.virtual_pipeline: 2 needs parallel.pipeline > 1' -- --config configs/tiny.yaml --set parallel.virtual_pipeline=2 --dry-run --no-data-check
expect 2 'batch.global_batch_size.*not a multiple of parallel.pipeline 2.*interleaved' -- --config configs/tiny.yaml --set parallel.pipeline=2 --set parallel.virtual_pipeline=2 --set model.num_layers=4 --set batch.global_batch_size=5 --set parallel.micro_batch_size=1 --dry-run --no-data-check
expect 4 "not found \[$tmp/tiny\.idx\]: no such file" -- --config configs/tiny.yaml --set "data.blend=[{prefix: $tmp/tiny, weight: 1}]"
# Where to train: device: auto | cpu | cuda (--device wins over the recipe). cuda with no GPU
# visible (CUDA_VISIBLE_DEVICES= hides any) is exit 3 naming the key and the fix, whether or
# not this build has the CUDA backend; auto falls back to the CPU.
expect 0 '^  --device TEXT:\{auto,cpu,cuda\}$' -- --help
expect 0 '^ +auto, cpu or cuda: where to train \(overrides the recipe.s device key' -- --help
expect 2 "invalid argument \[device\]: 'tpu' is not one of auto, cpu, cuda" -- --config configs/tiny.yaml --set device=tpu --dry-run --no-data-check
expect 2 '--device: tpu not in \{auto,cpu,cuda\}' -- --config configs/tiny.yaml --device tpu
device_data=(--set "data.blend=[{prefix: $tmp/good, weight: 1}]" --set data.cache_dir="$tmp/cache"
  --set schedule.train_iters=3 --set logging.metrics_file="$tmp/device/metrics.jsonl")
CUDA_VISIBLE_DEVICES= expect 3 'not yet supported \[device\]: device: cuda, but (no CUDA GPU is visible|this mtnlg-train was built without the CUDA backend).*set device: cpu' -- --config configs/tiny.yaml --device cuda "${device_data[@]}"
CUDA_VISIBLE_DEVICES= expect 3 'device: cuda, but' -- --config configs/tiny.yaml --set device=cuda "${device_data[@]}"
CUDA_VISIBLE_DEVICES= expect 0 'device: cpu' -- --config configs/tiny.yaml --device auto "${device_data[@]}"
CUDA_VISIBLE_DEVICES= expect 0 'device: cpu' -- --config configs/tiny.yaml --set device=cuda --device cpu "${device_data[@]}"

echo "cli: $passes passed, $failures failed"
exit $((failures > 0))
