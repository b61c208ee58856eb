#!/usr/bin/env bash
# Builds mtnlg-train with its CUDA backend on a GPU machine that reaches no package registry, and
# proves it there: CUDA kernels against their CPU twins, training on the GPU against the CPU, the
# demo in bf16, and a benchmark table. Run scripts/gpu/bundle.sh first where apt works.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"

usage() {
  cat <<'USAGE'
Usage: scripts/gpu/check.sh [--out DIR] [--prefix DIR] [--build-dir DIR] [--stages LIST]
                            [--arch SM] [--targets LIST] [--help]

On a machine with an NVIDIA GPU, CUDA (nvcc, cuBLAS, cuBLASLt) and NCCL:
  deps     unpack scripts/gpu/debs/*.deb (from scripts/gpu/bundle.sh) into --prefix and make
           their pkg-config and CMake files point there
  build    configure --build-dir with -DMTNLG_CUDA=ON for the GPU found (or --arch), and build
  kernels  the CUDA tests (ctest -L cuda): every CUDA kernel against its CPU twin
  train    20 iterations of configs/tiny.yaml on the GPU and on the CPU, losses compared (our
           attention kernels, which drop what the CPU drops), in fp32, bf16 and fp8 (the GPU's
           casts and cuBLASLt's FP8 GEMMs against the CPU's emulation); fp32 and bf16 with
           parallel.cuda_graph (each micro-batch replayed from a CUDA graph) equal to the plain
           GPU runs bit for bit
  layouts  the tiny recipe as several GPU ranks over NCCL (tp 2, pp 2, dp 2 overlapped, tp 2 x
           dp 2 ZeRO-1; bf16 pp 2 x dp 2 reducing in bf16; fp8 tp 2 x dp 2, its amaxes reduced
           over NCCL) against one GPU rank; a peer killed during NCCL all-reduces named by
           the survivor (PeerWatch) within 30 s of a 60 s timeout, and one 20 s late named
           at the survivor's 5 s timeout (OperationRoll); on a machine with fewer
           GPUs than ranks they share them (scripts/launch.sh, a distinct NCCL_HOSTID per rank
           so that NCCL accepts two ranks on one GPU and connects them over loopback sockets)
  demo     the CPU demo recipe (configs/demo-cpu.yaml) on the GPU in bf16
  eval     mtnlg-eval --tasks on the GPU (the training forward, fp32 and bf16) against the CPU's
           packed rows, on a tiny checkpoint trained here and the test task files: every
           request's log-likelihood and accuracy (tests/cmd/compare_task_samples.py); and
           mtnlg-generate: the GPU's greedy ids against the CPU's, GPT-2 small's shape's
           tokens/s on the CPU and the GPU (fp32, bf16)
  bench    in this order (a stage cut short by its time limit keeps what came first): after
           the GEMM rate, attention alone (GPT-2 124M, 1.3B and 530B-on-8-tensor-ranks
           shapes), forward and backward timed apart, ours (blocked, flash2, flash2 with its dq
           recomputing dS, flash2 with 128-row forward blocks, and cuDNN's fused attention as
           our backend runs it) against PyTorch's scaled_dot_product_attention held to its
           FA2 kernels and to cuDNN's, without and with dropout 0.1: OUT/attention.txt
           (mtnlg-bench-attention, bench/torch_attention.py); the 1.3B recipe end to end
           through mtnlg-train, the goal's figure (row 1.3b-train: its loader over data/demo,
           dropout, 16 micro-batches an iteration, 8 iterations, the default kernels, cuDNN's
           attention; row 1.3b-train-flash2 with our FA2-style kernels); the 530B recipe's
           3 layers as one GPU of its tp 8 x pp 35 layout holds them (mtnlg-bench-train
           --tensor-slice 8; rows 530b-layer-tp8, -flash2, -blocked); row 1.3b-train-blocked
           with the blocked kernels; row 1.3b-train-best with the fastest forward and backward
           of our own kernels in attention.txt combined, when that is none of these; tokens/s,
           MFU (against the GPU's datasheet dense peak) and peak memory on one GPU (GPT-2 124M,
           1.3B), with PyTorch's bf16 eager run on the same shapes as the anchor; GPT-2 124M's
           step replayed from a CUDA graph (row gpt2-124m-graph, mtnlg-bench-train --graph;
           the waits/iter column: the host's waits for the GPU an iteration; launches/mb: the
           launches of a micro-batch's forward and backward, which the graph replays as one);
           the 1.3B step
           in fp8 (row 1.3b-fp8: cuBLASLt's FP8 GEMMs, MFU against the FP8 peak), and both
           with four micro-batches an iteration (rows 1.3b-ga4, 1.3b-fp8-ga4: fp8's weights
           cast once an iteration; the log has the fp8 step without that); the 1.3B step
           with the blocked kernels; where the steps' time goes with dropout 0.1 and cuDNN's
           attention, each backend call timed and counted (mtnlg-bench-train --profile):
           OUT/profile-gpt2-124m-cudnn.txt, OUT/profile-1.3b-cudnn.txt; and the step with the
           FA2-style forward's 128-row blocks (MTNLG_CUDA_FLASH2_ROWS=128)
  ncu      Nsight Compute on the FA2-style kernels (forward, dk/dv, dq from stored dS, prep,
           and the recomputing dq; 1.3B shape, dropout
           0.1): OUT/ncu-flash2-*.txt; skipped where ncu is missing or not permitted
Each stage logs to WORK/STAGE.log (copied to OUT when it fails); the summary goes to
OUT/check.txt and OUT/check.json, the benchmark table to OUT/bench.txt and OUT/bench.json
(raw lines: WORK/bench-results.jsonl and WORK/attention-results.jsonl, kept out of OUT so
that a bench leaves at most 8 files there), rewritten after each row so that a bench cut short
by a time limit leaves the rows it measured. A stage is pass, fail or skip (what it needs is not on
the machine: only ncu skips).

  --out DIR        where the summary, the benchmark table and failed stages' logs go
                   (default: $OUT if set, else out/gpu)
  --work DIR       scratch: every stage's log, runs, data caches (default: /tmp/mtnlg-gpu-check)
  --prefix DIR     where the Debian packages are unpacked (default: /tmp/mtnlg-deps)
  --build-dir DIR  build directory (default: build-gpu)
  --stages LIST    comma-separated stages to run (default: all, in the order above)
  --arch SM        CUDA architecture, e.g. 90 (default: the first GPU's compute capability)
  --targets LIST   build only these CMake targets, comma-separated (e.g. mtnlg-bench-train), for
                   a short device call that runs them by hand (default: everything)
  --list           print the stages that would run, in order, and exit (checks --stages)
  -h, --help       this text

Environment: NCCL_ROOT  where nccl.h and libnccl.so* are (default: searched under /usr,
/usr/local/cuda and Python's nvidia/nccl package). Exit status: 0 when every stage passed,
1 when one failed (the summary names it; a skipped stage is not a failure), 2 for bad arguments.
USAGE
}

out=${OUT:-out/gpu}
work=/tmp/mtnlg-gpu-check
prefix=/tmp/mtnlg-deps
build_dir=build-gpu
# Every stage, in the order they run: the one list the default, the check of --stages and the
# run loop all read (a stage missing from one of them once made the default list an error).
all_stages=(deps build kernels train layouts demo eval bench ncu)
stages=$(IFS=,; echo "${all_stages[*]}")
list_only=false
arch=
targets=
while (($#)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --list) list_only=true; shift ;;
    --arch) arch=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for s in ${stages//,/ }; do
  known=false
  for k in "${all_stages[@]}"; do [[ $s == "$k" ]] && known=true; done
  if ! $known; then
    echo "check.sh: unknown stage '$s' in --stages (one or more of: $(IFS=,; echo "${all_stages[*]}"))" >&2
    exit 2
  fi
done
if $list_only; then
  for s in "${all_stages[@]}"; do [[ ,$stages, == *,$s,* ]] && echo "$s"; done
  exit 0
fi
mkdir -p "$out" "$work"
out=$(cd "$out" && pwd)
work=$(cd "$work" && pwd)
summary=$out/check.txt
: >"$summary"
declare -A result

log() { echo "check.sh: $*" | tee -a "$summary"; }
want() { [[ ",$stages," == *",$1,"* ]]; }

# Runs stage $1 (function stage_$1), its output in OUT/$1.log; records pass/fail, or skip when
# the stage returns 77 (what it needs is not on this machine; its log's last line says what).
# The call is in a || list, where bash ignores set -e in everything it runs: a stage with several
# checks must collect each one's status itself (`|| status=1`, then `return "$status"`), or only
# its last command would count.
run_stage() {
  local name=$1 start=$SECONDS rc=0
  log "---- $name"
  "stage_$name" >"$work/$name.log" 2>&1 || rc=$?
  if ((rc == 0)); then
    result[$name]=pass
  elif ((rc == 77)); then
    result[$name]=skip
    tail -n 1 "$work/$name.log" | sed 's/^/  | /' | tee -a "$summary"
  else
    result[$name]=fail
    cp "$work/$name.log" "$out/"
    tail -n 40 "$work/$name.log" | sed 's/^/  | /' | tee -a "$summary"
  fi
  log "$name: ${result[$name]} ($((SECONDS - start)) s)"
}

# ---- the environment this run found, for the summary ----
machine_facts() {
  log "host: $(uname -srm), $(. /etc/os-release && echo "$PRETTY_NAME"), $(nproc) cores"
  if command -v nvidia-smi >/dev/null; then
    log "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap \
      --format=csv,noheader | head -1)"
  else
    log "gpu: nvidia-smi not found"
  fi
  log "nvcc: $(nvcc --version 2>/dev/null | tail -2 | head -1 || echo none)"
  log "c++: $(c++ --version 2>/dev/null | head -1 || echo none); cmake: $(cmake --version | head -1)"
  log "python3: $(python3 -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>/dev/null || echo 'no torch')"
  # Where a cuDNN library is (the toolkit's, the system's, PyTorch's nvidia-cudnn wheel).
  log "cudnn: $(ls /usr/local/cuda/lib64/libcudnn.so.9* /usr/lib/x86_64-linux-gnu/libcudnn.so.9* \
    "$(python3 -c 'import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null)"/lib/libcudnn.so.9* \
    2>/dev/null | tr '\n' ' ' || true)"
}

libdir=$prefix/usr/lib/x86_64-linux-gnu
dep_env() {
  export PKG_CONFIG_PATH=$libdir/pkgconfig:$prefix/usr/share/pkgconfig:$prefix/usr/lib/pkgconfig
  export CMAKE_PREFIX_PATH=$prefix/usr:$prefix/usr/share/cmake:$libdir/cmake
  export LD_LIBRARY_PATH=$libdir:$prefix/usr/lib:$libdir/openblas-pthread:$libdir/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  command -v pkg-config >/dev/null || export PATH=$prefix/usr/bin:$PATH
  # cuDNN (the fused attention, MTNLG_CUDA_ATTENTION=cudnn): the toolkit's, else PyTorch's
  # nvidia-cudnn wheel's headers for the build and its library for the runs.
  if [[ -z ${CUDNN_ROOT:-} && ! -f /usr/local/cuda/include/cudnn_graph.h ]]; then
    local wheel
    wheel=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null) || true
    [[ -n $wheel && -f $wheel/include/cudnn_graph.h ]] && export CUDNN_ROOT=$wheel
  fi
  [[ -n ${CUDNN_ROOT:-} ]] && export LD_LIBRARY_PATH=$CUDNN_ROOT/lib:$LD_LIBRARY_PATH
  # pkgconf needs its own personality files when it is ours.
  [[ -x $prefix/usr/bin/pkgconf && ! -x /usr/bin/pkg-config ]] &&
    export PKG_CONFIG=$prefix/usr/bin/pkgconf
  return 0
}

stage_deps() {
  compgen -G "scripts/gpu/debs/*.deb" >/dev/null || {
    echo "no scripts/gpu/debs/*.deb: run scripts/gpu/bundle.sh where apt works, carry the folder"
    return 1
  }
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for deb in scripts/gpu/debs/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$prefix"
    else  # a .deb is an ar archive holding data.tar.*
      (cd "$prefix" && ar p "$repo/$deb" "$(ar t "$repo/$deb" | grep '^data.tar')" | tar -x -a -f - 2>/dev/null ||
        ar p "$repo/$deb" "$(ar t "$repo/$deb" | grep '^data.tar')" | tar -x --zstd -f - ||
        ar p "$repo/$deb" "$(ar t "$repo/$deb" | grep '^data.tar')" | tar -xJ -f -)
    fi
  done
  # Debian's files name /usr absolutely (pkg-config prefixes, Gloo's imported location, pmix's
  # rpath): point them at the prefix.
  grep -rlZ --include='*.pc' --include='*.cmake' -e '/usr' "$prefix" |
    xargs -0 -r sed -i -E "s#(^|[^A-Za-z0-9_./-]|-[IL])/usr(/|\$)#\1$prefix/usr\2#g"
  # update-alternatives never ran: make OpenBLAS's pkg-config file and library links by hand.
  ln -sf openblas-pthread/pkgconfig/openblas.pc "$libdir/pkgconfig/openblas.pc" 2>/dev/null ||
    ln -sf "$libdir/openblas-pthread/pkgconfig/openblas.pc" "$libdir/pkgconfig/openblas.pc"
  [[ -e $libdir/pkgconfig/openblas.pc ]] || {
    local pc
    pc=$(find "$prefix" -name 'openblas*.pc' | head -1)
    ln -sf "$pc" "$libdir/pkgconfig/openblas.pc"
  }
  # Absolute links in the packages (libfoo.so -> /usr/lib/...) must stay inside the prefix.
  find "$prefix" -type l | while read -r l; do
    t=$(readlink "$l")
    [[ $t == /* ]] && ln -sfn "$prefix$t" "$l"
  done
  dep_env
  pkg-config --modversion openblas pmix libxxhash
  ls "$prefix/usr/share/cmake/Gloo" "$libdir/cmake/yaml-cpp"
}

# NCCL: the system's, the toolkit's, or PyTorch's pip wheel (nvidia/nccl).
find_nccl() {
  local dirs=("${NCCL_ROOT:-}" /usr /usr/local/cuda /usr/local/nccl)
  local py
  py=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
  [[ -n $py ]] && dirs+=("$py")
  for d in "${dirs[@]}"; do
    [[ -n $d && -f $d/include/nccl.h ]] || continue
    local lib
    lib=$(find "$d" -maxdepth 3 -name 'libnccl.so*' 2>/dev/null | sort | head -1)
    [[ -n $lib ]] && { echo "$d/include $lib"; return 0; }
  done
  return 1
}

stage_build() {
  dep_env
  local nccl inc lib
  nccl=$(find_nccl) || { echo "NCCL not found: set NCCL_ROOT (nccl.h, libnccl.so*)"; return 1; }
  read -r inc lib <<<"$nccl"
  if [[ -z $arch ]]; then
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
  fi
  # That machine's compiler may be newer than CI's GCC 12: its false positives inside fmt's and
  # libstdc++'s headers (GCC 13's -Warray-bounds on fmt::bigint) stay warnings there; CI keeps
  # -Werror for all of them.
  local gcc_quirks=(-Wno-error=array-bounds -Wno-error=stringop-overflow
    -Wno-error=stringop-overread -Wno-error=restrict -Wno-error=maybe-uninitialized
    -Wno-error=dangling-reference)
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  # The corpus pipeline (mtnlg-curate) is for CPUs: its packages are not in the bundle.
  cmake -S . -B "$build_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMTNLG_CUDA=ON -DMTNLG_CURATE=OFF \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" -DNCCL_INCLUDE_DIR="$inc" -DNCCL_LIB="$lib" \
    -DGloo_DIR="$prefix/usr/share/cmake/Gloo" ${CUDNN_ROOT:+-DCUDNN_ROOT="$CUDNN_ROOT"} \
    -DCMAKE_CXX_FLAGS="${gcc_quirks[*]}" \
    -DCMAKE_CUDA_FLAGS="-Xcompiler=$(IFS=,; echo "${gcc_quirks[*]}")"
  # shellcheck disable=SC2086 # target names, no spaces in them
  cmake --build "$build_dir" -j "$(nproc)" ${targets:+--target ${targets//,/ }}
}

stage_kernels() {
  dep_env
  (cd "$build_dir" && ctest -L cuda --output-on-failure -j 1)
}

# An empty DIR holding the tiny test corpus at DIR/data/tiny (400 documents, vocabulary 512).
fresh_tiny_corpus() {
  rm -rf "$1"
  mkdir -p "$1/data"
  python3 tests/cmd/make_tiny_corpus.py "$1/data/tiny" 400 512
}

# 20 iterations of the tiny recipe (dropout on) on the CPU and the GPU: fp32 within
# reduction-order tolerance, a GPU rerun bit-identical, bf16 GPU against bf16 CPU in a band. Our
# own attention kernels (flash2, blocked where it does not apply): they drop what the CPU drops
# (cuDNN's attention, the default, draws its own masks; the kernels stage checks it).
stage_train() {
  dep_env
  local MTNLG_CUDA_ATTENTION=flash2
  export MTNLG_CUDA_ATTENTION
  local d=$work/train
  fresh_tiny_corpus "$d"
  local common=(--config configs/tiny.yaml --set schedule.train_iters=20
    --set "data.blend=[{prefix: $d/data/tiny, weight: 1}]" --set "data.cache_dir=$d/cache")
  local run dev prec status=0
  local graph
  for run in cpu cuda cuda_again cuda_graph cuda_bf16_graph cpu_bf16 cuda_bf16 cpu_fp8 cuda_fp8; do
    dev=${run%%_*}
    prec=fp32
    graph=false
    [[ $run == *bf16* ]] && prec=bf16
    [[ $run == *fp8 ]] && prec=fp8
    [[ $run == *graph ]] && graph=true
    "$build_dir/mtnlg-train" "${common[@]}" --device "$dev" --set "precision=$prec" \
      --set "parallel.cuda_graph=$graph" --set "logging.metrics_file=$d/$run/metrics.jsonl" ||
      status=1
  done
  python3 tests/cmd/compare_layouts.py "$d" cpu:cuda | tee -a "$summary" || status=1
  python3 tests/cmd/compare_layouts.py --exact "$d" cuda:cuda_again | tee -a "$summary" ||
    status=1
  # parallel.cuda_graph: each micro-batch replayed from a CUDA graph, dropout's streams moved
  # on the device (Backend::set_rng_stream_base): the plain run's losses bit for bit.
  python3 tests/cmd/compare_layouts.py --exact "$d" cuda:cuda_graph | tee -a "$summary" ||
    status=1
  python3 tests/cmd/compare_layouts.py --exact "$d" cuda_bf16:cuda_bf16_graph |
    tee -a "$summary" || status=1
  # bf16: each side rounds independently; 2 units of bf16 roundoff on the loss, 5% on grad norm.
  python3 tests/cmd/compare_layouts.py --band 0.008 0.05 "$d" cpu_bf16:cuda_bf16 |
    tee -a "$summary" || status=1
  # fp8 (the GPU's casts, core/cuda/fp8_cuda.cu, the CPU's bit for bit; cuBLASLt's FP8 GEMMs
  # with fp32 sums in their own order): the bf16 differences above feed the casts, and inputs
  # one bf16 rounding apart land on either side of an FP8 rounding boundary: fp8's own band
  # (tests/cmd/fp8_band_test.sh derives it; its tp layouts take it for the same reason).
  python3 tests/cmd/compare_layouts.py --band 0.0625 0.61 "$d" cpu_fp8:cuda_fp8 |
    tee -a "$summary" || status=1
  return "$status"
}

# Several GPU ranks over NCCL against one: the code above core/ (mappings, vocab-parallel loss,
# pipeline buffers, gradient buckets, ZeRO-1) on device tensors through NCCL. Ranks beyond the
# GPUs share them: NCCL refuses two ranks of one host on one GPU, so each rank gets its own
# NCCL_HOSTID (NCCL then thinks they are on different hosts and uses sockets on loopback).
stage_layouts() {
  dep_env
  # Our own attention kernels: their dropout masks are the same whatever the layout (the CPU's
  # element index), which the bf16 band below relies on.
  local MTNLG_CUDA_ATTENTION=flash2
  export MTNLG_CUDA_ATTENTION
  local d=$work/layouts
  fresh_tiny_corpus "$d"
  local gpus status=0
  gpus=$(nvidia-smi -L | wc -l)
  export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
  run_ranks() {  # NAME NP [--set ...]
    local name=$1 np=$2
    shift 2
    local cmd=("$build_dir/mtnlg-train" --config configs/tiny.yaml --device cuda
      --set schedule.train_iters=10 --set "data.split=[1,0,0]" --set parallel.micro_batch_size=2
      --set "data.blend=[{prefix: $d/data/tiny, weight: 1}]" --set "data.cache_dir=$d/cache"
      --set parallel.timeout_s=120 --set "logging.metrics_file=$d/$name/metrics.jsonl" "$@")
    if ((np == 1)); then
      "${cmd[@]}"
    elif ((np <= gpus)); then
      timeout 600 scripts/launch.sh -n "$np" -- "${cmd[@]}"
    else
      timeout 600 scripts/launch.sh -n "$np" -- \
        bash -c 'NCCL_HOSTID=mtnlg-check-$MTNLG_RANK exec "$@"' _ "${cmd[@]}"
    fi
  }
  run_ranks single 1 || status=1
  run_ranks tp2 2 --set parallel.tensor=2 || status=1
  run_ranks pp2 2 --set parallel.pipeline=2 || status=1
  run_ranks dp2 2 --set parallel.data=2 || status=1
  run_ranks tp2-dp2-zero1 4 --set parallel.tensor=2 --set parallel.zero_stage=1 || status=1
  run_ranks single-bf16 1 --set precision=bf16 || status=1
  run_ranks pp2-dp2-bf16 4 --set precision=bf16 --set parallel.pipeline=2 \
    --set parallel.grad_reduce_dtype=bf16 || status=1
  # fp8: the amaxes reduced over the tensor and data groups through NCCL (host scalars staged).
  run_ranks single-fp8 1 --set precision=fp8 || status=1
  run_ranks tp2-dp2-fp8 4 --set precision=fp8 --set parallel.tensor=2 || status=1
  # A peer that dies, and one that is late, during NCCL all-reduces: named by the survivor
  # (PeerWatch; OperationRoll) in seconds.
  nccl_two_ranks "$gpus" killed --timeout-s 60 --kill-rank 1
  nccl_rank0_named killed "FAILED: .*all_reduce.*peer rank 1 (global rank 1)" 30 || status=1
  nccl_two_ranks "$gpus" late --timeout-s 5 --late-rank 1 --late-ms 20000
  nccl_rank0_named late "did not say they reached this operation (collective 1 of the group): peer rank 1 (global rank 1)" 15 ||
    status=1
  python3 tests/cmd/compare_layouts.py "$d" single:tp2 single:pp2 single:dp2 \
    single:tp2-dp2-zero1 | tee -a "$summary" || status=1
  # bf16, gradients also summed in bf16: a band, as precision_band_test.sh allows.
  python3 tests/cmd/compare_layouts.py --band 0.01 0.05 "$d" single-bf16:pp2-dp2-bf16 |
    tee -a "$summary" || status=1
  # tp's bf16 partial sums move FP8 roundings: fp8's own band, as in fp8_band_test.sh.
  python3 tests/cmd/compare_layouts.py --band 0.0625 0.61 "$d" single-fp8:tp2-dp2-fp8 |
    tee -a "$summary" || status=1
  return "$status"
}

# Two ranks of mtnlg-comm-check --transport nccl ARGS started by hand, as a launcher that leaves
# survivors running would (scripts/launch.sh stops them): GPUS is the machine's count (one GPU
# shared through NCCL_HOSTID, as run_ranks does). Rank R's output goes to $work/nccl-NAME.R.log,
# ending with "rank R exit S after T s".
nccl_two_ranks() {
  local gpus=$1 name=$2 store r
  shift 2
  store=$(mktemp -d)
  for r in 0 1; do
    local hostid=()
    ((gpus < 2)) && hostid=(NCCL_HOSTID="mtnlg-check-$r")
    env MTNLG_RANK=$r MTNLG_WORLD_SIZE=2 MTNLG_STORE_DIR="$store" "${hostid[@]}" bash -c \
      'start=$SECONDS; "$@"; echo "rank $MTNLG_RANK exit $? after $((SECONDS - start)) s"' _ \
      "$build_dir/tests/mtnlg-comm-check" --transport nccl "$@" >"$work/nccl-$name.$r.log" 2>&1 &
  done
  wait || true
  rm -rf "$store"
  cat "$work/nccl-$name.0.log" "$work/nccl-$name.1.log"
}

# Rank 0 of nccl_two_ranks NAME failed with a message matching PATTERN within LIMIT seconds.
nccl_rank0_named() {
  local name=$1 pattern=$2 limit=$3 log took
  log=$work/nccl-$name.0.log
  took=$(sed -n 's/^rank 0 exit [0-9]* after \([0-9]*\) s$/\1/p' "$log")
  if grep -q "$pattern" "$log" && [[ -n $took ]] && ((took < limit)); then
    echo "nccl $name: rank 0 named rank 1 in $took s" | tee -a "$summary"
  else
    echo "nccl $name: FAIL: rank 0 did not name rank 1 within $limit s (took ${took:-?} s)" |
      tee -a "$summary"
    return 1
  fi
}

# The CPU demo recipe on the GPU in bf16, from data/demo (carry its .bin/.idx files).
stage_demo() {
  dep_env
  local d=$work/demo
  rm -rf "$d"
  mkdir -p "$d"
  [[ -f data/demo/kjv_text_document.idx && -f data/demo/fortunes_text_document.idx ]] || {
    echo "data/demo/*_text_document.{bin,idx} missing: run scripts/demo.sh once where the"
    echo "packages are (it prepares them) and carry those four files"
    return 1
  }
  "$build_dir/mtnlg-train" --config configs/demo-cpu.yaml --device cuda --set precision=bf16 \
    --set "logging.metrics_file=$d/metrics.jsonl" --set "data.cache_dir=$d/cache" || return 1
  python3 scripts/gpu/report.py demo "$d/metrics.jsonl" | tee -a "$summary"
}

# mtnlg-eval --tasks on the GPU against the CPU: a tiny GPT-2-vocabulary checkpoint trained on the
# CPU, the test task files, scored by the CPU's packed rows, the GPU's training forward in fp32
# (float32 rounding: 1e-4) and in bf16 (a band).
stage_eval() {
  dep_env
  local d=$work/eval status=0
  fresh_tiny_corpus "$d"
  "$build_dir/mtnlg-train" --config configs/tiny.yaml --device cpu --set model.vocab_size=50257 \
    --set schedule.train_iters=8 --set eval.interval=0 --set "data.split=[1,0,0]" \
    --set "data.blend=[{prefix: $d/data/tiny, weight: 1}]" --set "data.cache_dir=$d/cache" \
    --set "checkpoint.dir=$d/ckpt" --set checkpoint.save_interval=8 \
    --set "logging.metrics_file=$d/metrics.jsonl" || return 1
  python3 tests/cmd/make_task_files.py "$d/tasks" || return 1
  local name args
  for name in cpu cuda cuda_bf16; do
    case $name in
      cpu) args=(--device cpu) ;;
      cuda) args=(--device cuda) ;;
      cuda_bf16) args=(--device cuda --dtype bf16) ;;
    esac
    "$build_dir/mtnlg-eval" --checkpoint "$d/ckpt" "${args[@]}" --log-level info \
      --tasks lambada_openai,piqa,winogrande,race,hellaswag --task-dir "$d/tasks" \
      --num-fewshot 0,2 --bootstrap-iters 0 --log-samples "$d/$name.samples" >"$d/$name.jsonl" ||
      status=1
    "$build_dir/mtnlg-eval" --checkpoint "$d/ckpt" "${args[@]}" --tasks wikitext \
      --task-dir "$d/tasks" --log-samples "$d/$name.wikitext.samples" \
      >"$d/$name.wikitext.jsonl" || status=1
  done
  if python3 tests/cmd/compare_task_samples.py "$d" cpu cuda 1e-4; then
    echo "eval: cuda fp32 = cpu" | tee -a "$summary"
  else
    echo "eval: FAIL: cuda fp32 differs from cpu" | tee -a "$summary"
    status=1
  fi
  if python3 tests/cmd/compare_task_samples.py "$d" cpu cuda_bf16 0.05; then
    echo "eval: cuda bf16 within 5% of cpu" | tee -a "$summary"
  else
    echo "eval: FAIL: cuda bf16 not within 5% of cpu" | tee -a "$summary"
    status=1
  fi
  # mtnlg-generate: the tiny checkpoint's greedy ids on the GPU equal the CPU's; then GPT-2
  # small's shape (one iteration trained here) generates 128 tokens on each, tokens/s compared.
  local greedy=(--input-format ids --prompt "818 262 3726" --temperature 0 --max-new-tokens 24
    --no-stop-at-eod --output-format ids)
  local a b
  a=$("$build_dir/mtnlg-generate" --checkpoint "$d/ckpt" "${greedy[@]}" --device cpu) || status=1
  b=$("$build_dir/mtnlg-generate" --checkpoint "$d/ckpt" "${greedy[@]}" --device cuda) || status=1
  if [[ -n "$a" && "$a" == "$b" ]]; then
    echo "generate: cuda fp32 greedy ids = cpu" | tee -a "$summary"
  else
    echo "generate: FAIL: cuda ids '$b' differ from cpu's '$a'" | tee -a "$summary"
    status=1
  fi
  "$build_dir/mtnlg-train" --config configs/tiny.yaml --device cuda --set model.vocab_size=50257 \
    --set model.num_layers=12 --set model.hidden_size=768 --set model.num_attention_heads=12 \
    --set model.seq_length=1024 --set schedule.train_iters=1 --set eval.interval=0 \
    --set "data.split=[1,0,0]" --set "data.blend=[{prefix: $d/data/tiny, weight: 1}]" \
    --set "data.cache_dir=$d/cache-gpt2" --set "checkpoint.dir=$d/gpt2" \
    --set checkpoint.save_interval=1 --set "logging.metrics_file=$d/gpt2.jsonl" || return 1
  local where
  for where in "cpu fp32" "cuda fp32" "cuda bf16"; do
    set -- $where
    "$build_dir/mtnlg-generate" --checkpoint "$d/gpt2" "${greedy[@]}" --max-new-tokens 128 \
      --device "$1" --dtype "$2" --log-level info 2>"$d/gen-$1-$2.err" >/dev/null || status=1
    echo "generate GPT-2 small shape, $1 $2: $(grep -o '[0-9.]* new tokens/s' "$d/gen-$1-$2.err")" |
      tee -a "$summary"
  done
  return "$status"
}

# e2e_overrides: what makes configs/1.3b.yaml the bench's end-to-end run (row 1.3b-train).
source scripts/gpu/e2e_overrides.sh

# One end-to-end row: the 1.3B recipe through mtnlg-train (scripts/gpu/e2e_overrides.sh), its
# data loader, dropout 0.1, AdamW once per 16 micro-batches (the recipe's 128 make the AdamW
# share smaller still); the metrics file's median of iterations 3-8 appended to JSONL as row
# NAME. The caller's environment (MTNLG_CUDA_ATTENTION) chooses the kernels. Fails when the run
# or its report does, or when data/demo is missing.
e2e_row() {
  local name=$1 j=$2
  if [[ ! -f data/demo/kjv_text_document.idx || ! -f data/demo/fortunes_text_document.idx ]]; then
    echo "bench: no row $name: data/demo/*_text_document.{bin,idx} missing (scripts/demo.sh"
    echo "prepares them; carry those four files)"
    return 1
  fi
  local t=$work/train-$name
  rm -rf "$t"
  mkdir -p "$t"
  if ! "$build_dir/mtnlg-train" --config configs/1.3b.yaml --device cuda "${e2e_overrides[@]}" \
    --set "data.cache_dir=$t/cache" --set "logging.metrics_file=$t/metrics.jsonl" \
    >"$t/train.log" 2>&1; then
    echo "bench: row $name failed:"
    tail -20 "$t/train.log"
    return 1
  fi
  grep -E "memory (at|after)" "$t/train.log" || true
  python3 scripts/gpu/report.py train-row "$name" bf16 "$t/metrics.jsonl" >>"$j"
}

# Tokens/s, MFU against the bf16 GEMM rate measured here, peak memory against the plan: ours
# (mtnlg-bench-train) and PyTorch eager (bench/torch_train.py) on the same shapes, bf16.
stage_bench() {
  dep_env
  local j=$work/bench-results.jsonl status=0
  rm -f "$j"
  # The table so far, rewritten after each row: a stage cut short by its time limit still leaves
  # OUT/bench.txt and bench.json with the rows it measured (the planner's rows come first).
  refresh_table() { python3 scripts/gpu/report.py bench "$j" "$out/bench.json" >"$out/bench.txt" 2>/dev/null || true; }
  # The planner's figure for the shapes below (one rank, fp32 masters, no checkpointing).
  "$build_dir/mtnlg-train" --config configs/gpt2-124m.yaml --dry-run --no-data-check --json --world-size 1 \
    --set parallel.micro_batch_size=8 --set batch.global_batch_size=8 |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"impl": "plan", "name": "gpt2-124m", "memory_bytes": d["memory_per_rank_bytes"]["total"]}))' >>"$j" || status=1
  "$build_dir/mtnlg-train" --config configs/1.3b.yaml --dry-run --no-data-check --json --world-size 1 \
    --set parallel.micro_batch_size=4 --set batch.global_batch_size=4 |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"impl": "plan", "name": "1.3b", "memory_bytes": d["memory_per_rank_bytes"]["total"]}))' >>"$j" || status=1
  "$build_dir/mtnlg-train" --config configs/1.3b.yaml --dry-run --no-data-check --json --world-size 1 \
    "${e2e_overrides[@]}" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); t=d["memory_per_rank_bytes"]["total"]; [print(json.dumps({"impl": "plan", "name": n, "memory_bytes": t})) for n in ("1.3b-train", "1.3b-train-blocked", "1.3b-train-best")]' >>"$j" || status=1
  "$build_dir/bench/mtnlg-bench-gemm" --device cuda --dtype bf16 --models gpt2-124m-b8,1.3b \
    --min-time 0.1 --json >>"$j" || status=1
  refresh_table
  # Attention alone, forward and backward timed apart, ours (blocked and FA2-style kernels) and
  # PyTorch's scaled_dot_product_attention (its FlashAttention-2 kernels) on the same shapes,
  # without and with the recipe's dropout: OUT/attention.txt and attention.json. A few seconds;
  # first, as the figures that say where attention stands against FA2.
  local a=$work/attention-results.jsonl p
  rm -f "$a"
  for p in 0 0.1; do
    "$build_dir/bench/mtnlg-bench-attention" --device cuda \
      --kernels blocked,flash2,flash2-recompute,flash2-128 \
      --dropout "$p" \
      --min-time 0.2 --json >>"$a" || status=1
    python3 bench/torch_attention.py --device cuda --dropout "$p" --min-time 0.2 --json >>"$a" ||
      status=1
    # cuDNN's fused attention through PyTorch (SDPBackend.CUDNN_ATTENTION): the goal's anchor.
    python3 bench/torch_attention.py --device cuda --backend cudnn --dropout "$p" --min-time 0.2 \
      --json >>"$a" || status=1
  done
  python3 scripts/gpu/report.py attention "$a" "$out/attention.json" | tee "$out/attention.txt" ||
    status=1
  # cuDNN's fused attention as our backend runs it (MTNLG_CUDA_ATTENTION=cudnn), apart: a shape
  # cuDNN refuses fails this call alone.
  for p in 0 0.1; do
    "$build_dir/bench/mtnlg-bench-attention" --device cuda --kernels cudnn --dropout "$p" \
      --min-time 0.2 --json >>"$a" || status=1
  done
  python3 scripts/gpu/report.py attention "$a" "$out/attention.json" | tee "$out/attention.txt" ||
    status=1
  # The recipe end to end (the goal's figure), right after attention alone so that a stage cut
  # short by its time limit keeps it: the default kernels (cuDNN's attention; row 1.3b-train),
  # then our FA2-style ones (row 1.3b-train-flash2).
  e2e_row 1.3b-train "$j" || status=1
  refresh_table
  MTNLG_CUDA_ATTENTION=flash2 e2e_row 1.3b-train-flash2 "$j" || status=1
  refresh_table
  # The 530B recipe's layers as one GPU of its tp 8 x pp 35 layout holds them (3 layers of
  # hidden 20480 / 8, 16 heads of 160 a rank, sequence 2048, micro-batch 1, activation
  # checkpointing, bf16, 8 micro-batches a step; with its vocabulary shard, 51200 / 8), the
  # collectives skipped (mtnlg-bench-train --tensor-slice): the default kernels (cuDNN's), the
  # FA2-style ones and the blocked ones.
  local slice=(--layers 3 --hidden 20480 --heads 128 --seq 2048 --vocab 51200 --micro-batch 1
    --global-batch 8 --tensor-slice 8 --activation-checkpointing --precision bf16 --iters 4
    --warmup-iters 2)
  local k
  for k in default flash2 blocked; do
    local name=530b-layer-tp8
    [[ $k == default ]] || name=$name-$k
    if [[ $k == default ]]; then
      "$build_dir/bench/mtnlg-bench-train" --name "$name" "${slice[@]}" --device cuda --json \
        >>"$j" || status=1
    else
      MTNLG_CUDA_ATTENTION=$k "$build_dir/bench/mtnlg-bench-train" --name "$name" \
        "${slice[@]}" --device cuda --json >>"$j" || status=1
    fi
    refresh_table
  done
  MTNLG_CUDA_ATTENTION=blocked e2e_row 1.3b-train-blocked "$j" || status=1
  refresh_table
  # The fastest forward and the fastest backward attention.txt found on the recipe's shape and
  # dropout, combined (row 1.3b-train-best: report.py attention-choice), unless they are one of
  # the two rows above.
  local best
  best=$(python3 scripts/gpu/report.py attention-choice "$out/attention.json" 1.3b 0.1) || best=
  if [[ -n $best ]]; then
    echo "bench: row 1.3b-train-best with $best"
    # shellcheck disable=SC2086 # NAME=VALUE words, no spaces in them
    (export $best && e2e_row 1.3b-train-best "$j") || status=1
    refresh_table
  fi
  local gpt2=(--name gpt2-124m --layers 12 --hidden 768 --heads 12 --seq 1024 --micro-batch 8
    --global-batch 8 --iters 8 --warmup-iters 2 --precision bf16)
  local xl=(--name 1.3b --layers 24 --hidden 2048 --heads 16 --seq 2048 --micro-batch 4
    --global-batch 4 --iters 5 --warmup-iters 2 --precision bf16)
  for model in gpt2 xl; do
    local -n args=$model
    "$build_dir/bench/mtnlg-bench-train" "${args[@]}" --device cuda --json >>"$j" || status=1
    refresh_table
    python3 bench/torch_train.py "${args[@]}" --device cuda --json >>"$j" || status=1
    refresh_table
  done
  # GPT-2 124M's step replayed from a CUDA graph (row gpt2-124m-graph; issue #36 item 4): one
  # micro-batch's forward and backward captured after the warm-up (mtnlg-bench-train --graph);
  # its ms/iter and waits/iter beside row gpt2-124m's, and the same loss (no dropout in either).
  "$build_dir/bench/mtnlg-bench-train" "${gpt2[@]/#gpt2-124m/gpt2-124m-graph}" --graph \
    --device cuda --json >>"$j" || status=1
  refresh_table
  # The 1.3B step in precision: fp8 (row 1.3b-fp8): the casts on the GPU (delayed scaling's
  # amaxes raised on the device, read once a step), the operands packed to FP8 bytes and
  # cuBLASLt's FP8 GEMMs (or the bf16 GEMM where cuBLASLt has none: the log says so). The goal's
  # ratio is this row's tokens/s over row 1.3b's.
  local fp8=("${xl[@]/#1.3b/1.3b-fp8}")
  fp8=("${fp8[@]/#bf16/fp8}")
  "$build_dir/bench/mtnlg-bench-train" "${fp8[@]}" --device cuda --json >>"$j" || status=1
  refresh_table
  # Four micro-batches an iteration, as the recipe accumulates (rows 1.3b-ga4 and 1.3b-fp8-ga4):
  # fp8's weights cast once an iteration (fp8.cache_weights), so the fp8/bf16 ratio here is the
  # recipe's; --compare-weights prints (in the log) the fp8 step with and without the frozen-
  # weights window, i.e. with and without the weight casts kept.
  local ga4=(--name 1.3b-ga4 --layers 24 --hidden 2048 --heads 16 --seq 2048 --micro-batch 4
    --global-batch 16 --iters 4 --warmup-iters 1 --precision bf16)
  "$build_dir/bench/mtnlg-bench-train" "${ga4[@]}" --device cuda --json >>"$j" || status=1
  local fp8_ga4=("${ga4[@]/#1.3b-ga4/1.3b-fp8-ga4}")
  fp8_ga4=("${fp8_ga4[@]/#bf16/fp8}")
  "$build_dir/bench/mtnlg-bench-train" "${fp8_ga4[@]}" --compare-weights --device cuda \
    --json >>"$j" || status=1
  refresh_table
  # The 1.3B step with the blocked attention kernels (core/cuda/attention_cuda.cu; row
  # 1.3b-blocked; the default, row 1.3b, takes the FA2-style ones): first of the step's variants.
  MTNLG_CUDA_ATTENTION=blocked "$build_dir/bench/mtnlg-bench-train" "${xl[@]/#1.3b/1.3b-blocked}" \
    --device cuda --json >>"$j" || status=1
  refresh_table
  # Where the step's time goes with the recipe's dropout (0.1) and the default attention (cuDNN's),
  # each backend call timed and counted (a synchronization after each: the sum is above the
  # step's own time, by about a launch per call): the 1.3B step (OUT/profile-1.3b-cudnn.txt) and
  # GPT-2 124M's (OUT/profile-gpt2-124m-cudnn.txt), the model issue #36 takes out of the launch
  # bound. (The blocked and FA2-style 1.3B steps were profiled on an H200: docs/gpu.md.)
  local model i
  for model in gpt2 xl; do
    local -n shape=$model
    local prof=()  # the row's shape without its iteration counts (an option given once)
    for ((i = 0; i < ${#shape[@]}; i++)); do
      case ${shape[i]} in --iters | --warmup-iters) ((i += 1)) ;; *) prof+=("${shape[i]}") ;; esac
    done
    MTNLG_CUDA_ATTENTION=cudnn "$build_dir/bench/mtnlg-bench-train" "${prof[@]}" \
      --iters 2 --warmup-iters 1 --dropout 0.1 --profile --device cuda \
      >"$out/profile-${shape[1]}-cudnn.txt" 2>&1 || status=1
  done
  # The 1.3B step with the FA2-style forward's 128-row blocks (MTNLG_CUDA_FLASH2_ROWS=128; row
  # 1.3b-flash2-128). (The unfused epilogues, row 1.3b-unfused of earlier kits, were measured
  # on an H200 and are no longer timed here: `mtnlg-bench-train` with MTNLG_CUDA_EPILOGUES=off
  # times them by hand. Rows 1.3b-flash and 1.3b-grid timed the first flash kernels, removed on
  # 2026-11-27.)
  MTNLG_CUDA_ATTENTION=flash2 MTNLG_CUDA_FLASH2_ROWS=128 "$build_dir/bench/mtnlg-bench-train" \
    "${xl[@]/#1.3b/1.3b-flash2-128}" --device cuda --json >>"$j" || status=1
  python3 scripts/gpu/report.py bench "$j" "$out/bench.json" | tee "$out/bench.txt" || return 1
  return "$status"
}

# Nsight Compute's view of the FA2-style kernels on the 1.3B shape with the recipe's dropout:
# where each of forward, dk/dv, dq (from stored dS, and recomputing), prep spends its cycles (tensor pipe and shared-memory
# throughput, occupancy, warp stall reasons), one launch each, OUT/ncu-flash2-KERNEL.txt. Skipped
# (77) where ncu is missing or the driver keeps the performance counters from this user.
stage_ncu() {
  dep_env
  local ncu kernel rc=0
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /usr/local/cuda*/nsight-compute*/ncu \
    /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1) || true
  if [[ -z $ncu ]]; then
    echo "ncu: Nsight Compute not found (PATH, /usr/local/cuda*, /opt/nvidia/nsight-compute)"
    return 77
  fi
  # The backward's passes with dS stored (the default: prep, dkv, dq_stored) and the dq pass that
  # recomputes it (MTNLG_CUDA_FLASH2_DQ=recompute).
  local kernels
  for kernel in forward dkv dq_stored prep dq; do
    kernels=flash2
    [[ $kernel == dq ]] && kernels=flash2-recompute
    "$ncu" --kernel-name "regex:flash2_${kernel}_kernel" --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section SchedulerStats --section InstructionStats \
      "$build_dir/bench/mtnlg-bench-attention" --device cuda --kernels "$kernels" --shapes 1.3b \
      --dropout 0.1 --min-time 0 >"$out/ncu-flash2-$kernel.txt" 2>&1 || rc=1
    if grep -q "ERR_NVGPUCTRPERM" "$out/ncu-flash2-$kernel.txt"; then
      echo "ncu: the driver keeps the GPU performance counters from this user (ERR_NVGPUCTRPERM)"
      return 77
    fi
  done
  return "$rc"
}

machine_facts
for s in "${all_stages[@]}"; do
  want "$s" || continue
  if declare -F "stage_$s" >/dev/null; then
    run_stage "$s"
  else
    result[$s]=fail
    log "$s: fail (this kit has no such stage yet)"
  fi
done

# ---- summary ----
{
  printf '{"stages": {'
  sep=
  for s in "${!result[@]}"; do printf '%s"%s": "%s"' "$sep" "$s" "${result[$s]}"; sep=', '; done
  printf '}}\n'
} >"$out/check.json"
failed=0
for s in "${!result[@]}"; do [[ ${result[$s]} == fail ]] && failed=1; done
log "summary: $(cat "$out/check.json")"
exit $failed
