#!/usr/bin/env bash
# Communication of the 3D-parallel layouts on the tiny model, measured against the planner.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  cat <<'USAGE'
Usage: bench/comm_bench.sh BUILD_DIR [--quick] [--iters N] [--layouts LIST] [--help]

Builds nothing of ours: takes BUILD_DIR/mtnlg-train and BUILD_DIR/bench/mtnlg-bench-collective
(build them first: cmake --build BUILD_DIR --target mtnlg-train mtnlg-bench-collective). Makes a synthetic corpus (tests/cmd/make_tiny_corpus.py), then trains
configs/tiny.yaml with 4 layers, micro-batch 1, global batch 16, --threads 1, under mpirun, and
prints four tables:

1. Bytes sent per rank per iteration, layout (tensor, pipeline, data) = (1,1,1) (2,1,1) (4,1,1)
   (1,2,1) (1,4,1) (1,1,2) (1,1,4) (2,2,2) (1,2,4), each with and without ZeRO-1 where data > 1:
   what each rank's communicators counted (bytes_sent(), the nccl-tests bus-bandwidth
   convention; the "communication:" line mtnlg-train logs at the end), per group, beside the
   planner's count (mtnlg-train --dry-run --json, field "communication"), and their ratio.
   Ranks of a stage that sent the same bytes share a row. 3 iterations each (every iteration
   sends the same).
2. Time per iteration (median after the first 3) of (1,1,1), and of (2,1,1) and (1,2,1) over
   shared memory (MTNLG_TRANSPORT=auto, the default), over our TCP (tcp) and over Gloo's (gloo),
   the pipeline bubble (pp-1)/(m+pp-1) the planner predicts for (1,2,1) with m = 16
   micro-batches, and each layout's time relative to (1,1,1).
3. The pipeline bubble: (1,2,1) with plain 1F1B and with 2 chunks per stage
   (parallel.virtual_pipeline: 2): each stage's share of training time in its pipeline
   send/recv calls (the "pipeline wait:" line mtnlg-train logs) beside the planned bubble.
4. Collective latency on 2 ranks, side by side in this run: all-reduce, reduce-scatter,
   all-gather, broadcast and a send/recv ping-pong at 1 KiB - 1 MiB, ours (build/bench/mtnlg-bench-collective) over shared memory and
   over TCP, against Open MPI's MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast and
   MPI_Send+MPI_Recv (bench/mpi_collective_ref.c,
   built here with mpicc) over its shared-memory (vader) and TCP transports; ratio ours / MPI
   for the same kind of transport. Each cell is the median of 5 rounds, each round running
   ours and Open MPI's in turn.

  --quick         fewer timed iterations (8 instead of 20)
  --iters N       timed iterations (at least 4)
  --layouts LIST  space-separated subset of the communication layouts, e.g. "1,1,1 2,2,2"
  -h, --help      this text

Environment: PYTHON (default /usr/bin/python3, which has numpy for the corpus script). Raw
outputs are kept in BUILD_DIR/comm-bench/. Takes about 2-4 minutes on 2 cores.
USAGE
}

[[ $# -ge 1 && $1 != -h && $1 != --help ]] || { usage; [[ $# -ge 1 ]] && exit 0; exit 2; }
build_dir=$1
shift
timed_iters=20
layouts="1,1,1 2,1,1 4,1,1 1,2,1 1,4,1 1,1,2 1,1,4 2,2,2 1,2,4"
while (($#)); do
  case "$1" in
    --quick) timed_iters=8 ;;
    --iters | --layouts)
      [[ $# -ge 2 ]] || { echo "comm_bench.sh: $1 needs a value (see --help)" >&2; exit 2; }
      if [[ $1 == --iters ]]; then timed_iters=$2; else layouts=$2; fi
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *) echo "comm_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $timed_iters =~ ^[0-9]+$ && $timed_iters -ge 4 ]] ||
  { echo "comm_bench.sh: --iters must be at least 4" >&2; exit 2; }
bin=$build_dir/mtnlg-train
[[ -x $bin ]] || { echo "comm_bench.sh: $bin not found (build the mtnlg-train target)" >&2; exit 1; }
python=${PYTHON:-/usr/bin/python3}
command -v mpirun >/dev/null || { echo "comm_bench.sh: mpirun not found" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

out=$build_dir/comm-bench
rm -rf "$out"
mkdir -p "$out"
"$python" tests/cmd/make_tiny_corpus.py "$out/corpus" 400 512

# The same model and batch for every layout: 4 layers so that 4 stages get one each.
common=(--config configs/tiny.yaml --threads 1 --log-level info
  --set "data.blend=[{prefix: $out/corpus, weight: 1}]" --set "data.split=[9,1,0]"
  --set eval.interval=0 --set model.num_layers=4 --set parallel.micro_batch_size=1
  --set batch.global_batch_size=16 --set data.cache_dir="$out/cache")

# run NAME TP PP DP ZERO ITERS [TRANSPORT [CHUNKS]]: trains, keeps the log and metrics, and the
# plan of the layout.
run() {
  local name=$1 tp=$2 pp=$3 dp=$4 zero=$5 iters=$6 transport=${7:-auto} chunks=${8:-1}
  local np=$((tp * pp * dp))
  local args=("${common[@]}" --set parallel.tensor="$tp" --set parallel.pipeline="$pp"
    --set parallel.zero_stage="$zero" --set schedule.train_iters="$iters"
    --set parallel.virtual_pipeline="$chunks" --set logging.metrics_file="$out/$name/metrics.jsonl")
  echo "comm_bench.sh: $name ($np ranks)" >&2
  "$bin" "${args[@]}" --dry-run --json --world-size "$np" >"$out/$name.plan.json"
  local load1 _
  read -r load1 _ </proc/loadavg
  if ((np == 1)); then
    "$bin" "${args[@]}" >"$out/$name.log" 2>&1
  else
    # --bind-to none: ranks (and Gloo's I/O threads) oversubscribe the cores; Open MPI's default
    # core binding made small all-reduces ~3x slower here.
    mpirun --bind-to none --oversubscribe --allow-run-as-root -x MTNLG_TRANSPORT="$transport" \
      -np "$np" "$bin" "${args[@]}" >"$out/$name.log" 2>&1
  fi || { echo "comm_bench.sh: $name failed; see $out/$name.log" >&2; tail -5 "$out/$name.log" >&2; exit 1; }
  if [[ $name == bubble-* ]]; then
    echo "$name $pp $chunks $load1" >>"$out/bubble_runs.txt"
  else
    echo "$name $tp $pp $dp $zero $load1 $transport" >>"$out/runs.txt"
  fi
}

: >"$out/runs.txt"
: >"$out/bubble_runs.txt"
for layout in $layouts; do
  IFS=, read -r tp pp dp <<<"$layout"
  run "comm-$tp-$pp-$dp" "$tp" "$pp" "$dp" 0 3
  ((dp > 1)) && run "comm-$tp-$pp-$dp-zero1" "$tp" "$pp" "$dp" 1 3
done
run "time-1-1-1" 1 1 1 0 "$timed_iters"
for transport in auto tcp gloo; do
  for layout in 2,1,1 1,2,1; do
    IFS=, read -r tp pp dp <<<"$layout"
    run "time-$tp-$pp-$dp-$transport" "$tp" "$pp" "$dp" 0 "$timed_iters" "$transport"
  done
done
# The pipeline bubble: (1,2,1) (one stage per core here) with plain 1F1B and with 2 chunks per
# stage; every stage logs its share of training time in pipeline send/recv beside the planned
# bubble.
for chunks in 1 2; do
  run "bubble-pp2-v$chunks" 1 2 1 0 "$timed_iters" auto "$chunks"
done

# Collectives, ours and Open MPI's, 2 ranks, one after the other in this run; 100 warm-up calls
# per size (the first size right after a launch otherwise pays for the processes settling).
coll=$build_dir/bench/mtnlg-bench-collective
[[ -x $coll ]] || { echo "comm_bench.sh: $coll not found (build mtnlg-bench-collective)" >&2; exit 1; }
mpicc -O2 -o "$out/mpi_collective_ref" bench/mpi_collective_ref.c ||
  { echo "comm_bench.sh: mpicc failed (Debian: libopenmpi-dev)" >&2; exit 1; }
launch=(mpirun --bind-to none --oversubscribe --allow-run-as-root -np 2)
coll_iters=$((timed_iters * 25))
# Five rounds, ours and Open MPI's interleaved in each: the table takes each cell's median, so one
# scheduler hiccup (a few ms on these shared cores, against calls of a microsecond) moves no cell.
for round in 1 2 3 4 5; do
  for op in all_reduce reduce_scatter all_gather broadcast send_recv; do
    for transport in shm tcp; do
      "${launch[@]}" "$coll" --op "$op" --transport "$transport" --iters "$coll_iters" --warmup 100 \
        --min-bytes 1024 --max-bytes 1048576 >"$out/coll-ours-$op-$transport.$round.txt" 2>&1 ||
        { echo "comm_bench.sh: mtnlg-bench-collective $op $transport failed" >&2; exit 1; }
    done
    case $op in all_reduce) mop=allreduce ;; all_gather) mop=allgather ;; send_recv) mop=sendrecv ;; *) mop=$op ;; esac
    for btl in vader tcp; do
      "${launch[@]}" --mca btl "self,$btl" "$out/mpi_collective_ref" "$mop" 1024 1048576 \
        "$coll_iters" 100 >"$out/coll-mpi-$op-$btl.$round.txt" 2>&1 ||
        { echo "comm_bench.sh: mpi_collective_ref $op over $btl failed" >&2; exit 1; }
    done
  done
done

"$python" bench/comm_table.py "$out"
