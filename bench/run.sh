#!/usr/bin/env bash
# Training throughput of our CPU trainer against PyTorch, side by side, plus the GEMM ceiling.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  cat <<'USAGE'
Usage: bench/run.sh [--quick] [--threads N] [--models LIST] [--precision P] [--profile]
                    [--build-dir DIR] [--bin-dir DIR] [--help]

Builds mtnlg-bench-train and mtnlg-bench-gemm (incrementally: a no-op when up to date), then
runs on N threads, one after the other:
  demo       4 layers, hidden 256, 4 heads, seq 128, vocab 50257, micro 4, global 8
  gpt2-124m  12 layers, hidden 768, 12 heads, seq 1024, vocab 50257, micro 1, global 1
each with mtnlg-bench-train (ours) and bench/torch_train.py (PyTorch) in each precision asked
for (fp32: float32 both; bf16: ours bf16 weights/activations with fp32 masters, PyTorch
torch.autocast("cpu", bfloat16)), then mtnlg-bench-gemm on the same shapes in f32 and bf16,
and prints one table:
  model | precision | impl | tokens/s | TFLOP/s | ms/iter | ratio ours/torch | % of GEMM ceiling
TFLOP/s counts model FLOPs per token by the one formula of model/gpt_flops.h (docs/planning.md: Model
FLOPs; 6N + 12*L*h*s with N the GEMM weights, tied head included). tokens/s and TFLOP/s use the median iteration; ms/iter
shows median (min); load1 is the 1-minute load average when the run started (this
machine's cores are shared, and contention slows both sides, torch's more). The ratio is of tokens/s (> 1: ours is faster) in the same precision. The GEMM ceiling is
the best rate mtnlg-bench-gemm measured over all shapes in the row's precision (f32 or bf16). Takes about 5-10 minutes on 2 idle cores
(--quick: about 2); other load on the machine slows both sides.

  --quick          fewer iterations (demo 2, gpt2-124m 1) and shorter GEMM timing
  --threads N      threads for both implementations and the GEMM bench (default: 2)
  --models LIST    comma-separated subset of demo,gpt2-124m (default: both)
  --precision P    fp32, bf16 or all (default: all)
  --profile        also run mtnlg-bench-train --profile on each model and print where the
                   time goes (one more run per model)
  --build-dir DIR  build directory (default: build); binaries are DIR/bench/mtnlg-bench-*
  --bin-dir DIR    take mtnlg-bench-train and mtnlg-bench-gemm from DIR and do not build
  -h, --help       this text

Environment: PYTHON (default /usr/bin/python3, which has torch 1.13), MTNLG_JOBS (build jobs,
default 2). Raw results (one JSON line per run) are kept in DIR/bench-results.jsonl.
USAGE
}

quick=0
threads=2
models=demo,gpt2-124m
precision=all
profile=0
build_dir=build
bin_dir=""
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --profile) profile=1 ;;
    --threads | --models | --precision | --build-dir | --bin-dir)
      [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a value (see --help)" >&2; exit 2; }
      case "$1" in
        --threads) threads=$2 ;;
        --models) models=$2 ;;
        --precision) precision=$2 ;;
        --build-dir) build_dir=$2 ;;
        --bin-dir) bin_dir=$2 ;;
      esac
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --threads must be a positive integer" >&2; exit 2; }
case "$precision" in
  fp32 | bf16) precisions=("$precision") ;;
  all) precisions=(fp32 bf16) ;;
  *) echo "run.sh: --precision must be fp32, bf16 or all, got '$precision'" >&2; exit 2 ;;
esac
python=${PYTHON:-/usr/bin/python3}
jobs=${MTNLG_JOBS:-2}

if [[ -z $bin_dir ]]; then
  targets=(mtnlg-bench-train mtnlg-bench-gemm)
  if [[ -x scripts/build.sh ]]; then
    # No --no-cuda: that would reconfigure a CUDA build directory as CPU-only (and the next
    # scripts/build.sh back), rebuilding everything twice; the CPU benchmark is the same binary.
    scripts/build.sh --build-dir "$build_dir" --target "${targets[0]}" --target "${targets[1]}"
  else
    cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build_dir" --target "${targets[@]}" -j "$jobs"
  fi
  bin_dir=$build_dir/bench
  results_dir=$build_dir
else
  results_dir=$bin_dir
fi
for exe in mtnlg-bench-train mtnlg-bench-gemm; do
  [[ -x $bin_dir/$exe ]] || { echo "run.sh: $bin_dir/$exe not found" >&2; exit 1; }
done
"$python" -c 'import torch' 2>/dev/null ||
  { echo "run.sh: $python cannot import torch (set PYTHON to one that can)" >&2; exit 1; }

results=$results_dir/bench-results.jsonl
: >"$results"

# Runs a --json command and appends its line to $results, tagged with the 1-minute load
# average when it started: other work on the machine shows there, not in the timings.
run_json() {
  local load1 _
  read -r load1 _ </proc/loadavg
  "$@" | sed "s/}\$/,\"load1\":$load1}/" >>"$results"
}

# name | model flags | iterations (normal) | iterations (--quick)
model_flags() {
  case "$1" in
    demo) echo "--layers 4 --hidden 256 --heads 4 --seq 128 --vocab 50257 --micro-batch 4 --global-batch 8" ;;
    gpt2-124m) echo "--layers 12 --hidden 768 --heads 12 --seq 1024 --vocab 50257 --micro-batch 1 --global-batch 1" ;;
    *) echo "run.sh: unknown model '$1' (demo, gpt2-124m)" >&2; exit 2 ;;
  esac
}
iters() {
  case "$1:$quick" in
    demo:0) echo "--iters 5 --warmup-iters 1" ;;
    demo:1) echo "--iters 2 --warmup-iters 1" ;;
    gpt2-124m:0) echo "--iters 3 --warmup-iters 1" ;;
    gpt2-124m:1) echo "--iters 1 --warmup-iters 1" ;;
  esac
}

IFS=, read -r -a model_list <<<"$models"
for m in "${model_list[@]}"; do
  flags=$(model_flags "$m")
  for p in "${precisions[@]}"; do
    # shellcheck disable=SC2046,SC2086  # word splitting of the flag strings is intended
    {
      echo "run.sh: $m $p: ours" >&2
      run_json "$bin_dir/mtnlg-bench-train" --name "$m" $flags $(iters "$m") \
        --threads "$threads" --precision "$p" --json
      echo "run.sh: $m $p: torch" >&2
      run_json "$python" bench/torch_train.py --name "$m" $flags $(iters "$m") \
        --threads "$threads" --precision "$p" --json
      if ((profile)); then
        echo "run.sh: $m $p: ours, --profile" >&2
        "$bin_dir/mtnlg-bench-train" --name "$m" $flags --iters 1 --warmup-iters 1 \
          --threads "$threads" --precision "$p" --profile
      fi
    }
  done
done

echo "run.sh: GEMM ceiling" >&2
gemm_time=0.5
((quick)) && gemm_time=0.1
run_json "$bin_dir/mtnlg-bench-gemm" --models "$models" --threads "$threads" \
  --min-time "$gemm_time" --json
# The bf16 rate (oneDNN) in the same run: the ceiling of the bf16 rows.
echo "run.sh: bf16 GEMM ceiling" >&2
run_json "$bin_dir/mtnlg-bench-gemm" --models "$models" --threads "$threads" \
  --min-time "$gemm_time" --dtype bf16 --json

"$python" bench/report.py "$results"
