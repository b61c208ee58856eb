#!/usr/bin/env bash
# Starts N ranks of a command on this machine without a PMIx launcher (no mpirun or srun): each
# rank gets the environment launch's variables (parallel/runtime.h) and the ranks meet through
# files in a fresh directory.
set -uo pipefail

usage() {
  cat <<'USAGE'
Usage: scripts/launch.sh -n N [--store-dir DIR] [--grace S] [--] COMMAND [ARGS...]

Starts N processes of COMMAND on this machine, rank r with
  MTNLG_RANK=r MTNLG_WORLD_SIZE=N MTNLG_LOCAL_RANK=r MTNLG_LOCAL_WORLD_SIZE=N MTNLG_NODE=0
  MTNLG_STORE_DIR=DIR
(mtnlg-train, mtnlg-bench-collective: any of our programs that take a PMIx launch), the way
`mpirun -np N` would, for machines without Open MPI or Slurm. Across nodes, have your launcher
set those variables itself (MTNLG_STORE_DIR on a shared file system; see docs/launching.md).

  -n, --np N       number of ranks (required)
  --store-dir DIR  the rendezvous directory: must be empty or absent (created); default: a new
                   temporary directory, removed at the end
  --grace S        after a rank fails, seconds the others get to exit after SIGTERM before
                   SIGKILL (default 30)
  -h, --help       this text

Each rank's output goes to this terminal. When a rank fails, the others are stopped (SIGTERM,
then SIGKILL after the grace period) and the exit status is the first failed rank's; SIGINT or SIGTERM to
this script is passed on to every rank (mtnlg-train then saves and exits 75 when it has a
checkpoint directory). Exit status 0 when every rank exits 0; 2 for a usage error.
USAGE
}

np=""
store=""
grace=30
while [[ $# -gt 0 ]]; do
  case $1 in
    -n | --np) np=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    --store-dir) store=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    --grace) grace=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "launch.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [[ ! $np =~ ^[1-9][0-9]*$ ]]; then
  echo "launch.sh: -n N (a positive number of ranks) is required (see --help)" >&2
  exit 2
fi
if [[ ! $grace =~ ^[0-9]+$ ]]; then
  echo "launch.sh: --grace S takes whole seconds, not '$grace' (see --help)" >&2
  exit 2
fi
if [[ $# -eq 0 ]]; then
  echo "launch.sh: no command to launch (see --help)" >&2
  exit 2
fi

remove_store=0
if [[ -z $store ]]; then
  store=$(mktemp -d "${TMPDIR:-/tmp}/mtnlg-store.XXXXXX") || exit 1
  remove_store=1
elif [[ -e $store ]]; then
  if [[ ! -d $store || -n $(ls -A "$store") ]]; then
    echo "launch.sh: --store-dir $store is not an empty directory: the ranks would read an" \
      "earlier job's rendezvous keys; give each job its own" >&2
    exit 2
  fi
else
  mkdir -p "$store" || exit 1
fi

pids=()
declare -A running  # pid -> rank
for ((r = 0; r < np; r++)); do
  MTNLG_RANK=$r MTNLG_WORLD_SIZE=$np MTNLG_LOCAL_RANK=$r MTNLG_LOCAL_WORLD_SIZE=$np \
    MTNLG_NODE=0 MTNLG_STORE_DIR=$store "$@" &
  pids+=($!)
  running[$!]=$r
done

stop_all() {  # SIGNAL: to every rank still running
  local p
  for p in "${!running[@]}"; do kill "-$1" "$p" 2>/dev/null; done
}
stopping=0  # a signal asked every rank to stop: their exit statuses are expected
trap 'stopping=1; stop_all INT' INT
trap 'stopping=1; stop_all TERM' TERM

status=0
kill_at=""  # SECONDS after which the ranks still running get SIGKILL
while ((${#running[@]} > 0)); do
  # Poll rather than `wait -n`: bash may drop a second child that ends at the same moment. A rank
  # that has ended stays a zombie until waited for here, so its pid cannot be reused meanwhile.
  for pid in "${!running[@]}"; do
    kill -0 "$pid" 2>/dev/null && continue
    wait "$pid"
    rc=$?
    rank=${running[$pid]}
    unset "running[$pid]"
    if ((rc != 0 && status == 0)); then
      status=$rc
      ((stopping)) && continue  # every rank was asked to stop: no deadline (they may be saving)
      echo "launch.sh: rank $rank exited with status $rc; stopping the others" >&2
      stop_all TERM
      kill_at=$((SECONDS + grace))
    fi
  done
  if [[ -n $kill_at ]] && ((SECONDS >= kill_at && ${#running[@]} > 0)); then
    echo "launch.sh: ${#running[@]} rank(s) still running ${grace} s after SIGTERM: SIGKILL" >&2
    stop_all KILL
    kill_at=""
  fi
  ((${#running[@]} > 0)) && sleep 0.1
done
((remove_store)) && rm -rf "$store"
exit "$status"
