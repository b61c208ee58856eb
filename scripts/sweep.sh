#!/usr/bin/env bash
# Recipe sweeps: one mtnlg-train run per combination of recipe values (their Cartesian product),
# each in its own run directory, one after another or as Slurm jobs; then a summary table.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(dirname "$script_dir")

usage() {
  cat <<'USAGE'
Usage: scripts/sweep.sh RECIPE KEY=V1,V2,... [KEY=...]... [--out DIR] [--sbatch]
                        [--sbatch-arg ARG]... [--bin PATH] [--progress S] [--force]
                        [-- MTNLG_TRAIN_ARGS...]

Runs mtnlg-train once per combination of the listed values (the Cartesian product; the last
key varies fastest), e.g.
  scripts/sweep.sh configs/tiny.yaml optimizer.lr=1e-3,3e-3 schedule.train_iters=50,100 \
      --out runs/lr-sweep -- --threads 2
is four runs. Each run N gets its own directory DIR/N-KEY1=V1-KEY2=V2 (characters other than
letters, digits and . _ + = - become _), holding
  metrics.jsonl          the metrics (--set logging.metrics_file=RUNDIR/metrics.jsonl)
  checkpoints/           the run's checkpoints, when the recipe saves any (below)
  resolved_recipe.yaml   the fully resolved recipe (written by mtnlg-train)
  train.log              mtnlg-train's stdout and stderr
  overrides.txt          this run's KEY=VALUE lines
  command.txt            the command line, shell-quoted
  exit_status            mtnlg-train's exit status, once it has finished
and, with --sbatch, job.sbatch (the batch script), submit.log (sbatch's output) and
slurm_job_id.

Values are YAML scalars or flow collections. They are split at commas outside brackets
[ ] { } and quotes ' ", so a list or map stays one value; \, is a literal comma:
  optimizer.betas=[0.9,0.95],[0.9,0.999]                    two values
  'data.blend=[{prefix: a, weight: 1}],[{prefix: b, weight: 1}]'   two values
A run is RECIPE with MTNLG_TRAIN_ARGS, then --set KEY=VALUE per key (so the sweep's values win
over a --set in MTNLG_TRAIN_ARGS), then --set logging.metrics_file=RUNDIR/metrics.jsonl and,
when the run saves checkpoints (checkpoint.dir is set; mtnlg-train --dry-run --json says),
--set checkpoint.dir=RUNDIR/checkpoints: runs never share, or resume from, one another's.

Locally the runs go one after another; every S seconds (--progress, default 30; 0: never) the
sweep prints how far the current run is (run N of M, iteration I of its T (the plan's count),
percent, last train loss, elapsed time), and when a run ends its time and final loss; a failed
run is reported (exit status and the last log line) and the sweep goes on. With --sbatch each run is submitted with
  sbatch --parsable SBATCH_ARGS... RUNDIR/job.sbatch
whose script runs `srun --mpi=pmix mtnlg-train ...` in the current directory (relative recipe
paths resolve against it, as for a local run), logs to RUNDIR/train.log and writes
RUNDIR/exit_status; its defaults (#SBATCH --nodes=1 --ntasks-per-node=1) yield to
--sbatch-arg, e.g. --sbatch-arg=--partition=gpu --sbatch-arg=--time=2:00:00.

At the end, scripts/metrics_summary.py prints one row per run: combination | status | final
train loss | final valid loss (- without validation) | tokens/s (mean of the last 10 train
lines). Run it again later on the run directories (e.g. when Slurm jobs have finished).

  --out DIR         where the run directories go (default: runs/sweep-RECIPE_NAME)
  --sbatch          submit each run as a Slurm job instead of running it here
  --sbatch-arg ARG  an extra sbatch option (repeatable)
  --bin PATH        mtnlg-train (default: $MTNLG_TRAIN, else build/mtnlg-train of this checkout)
  --progress S      seconds between progress lines of a local run (default 30; 0: none)
  --force           reuse run directories that already exist (their old files are removed)
  -h, --help        this text

Exit status: 0 every run succeeded (with --sbatch: every job was submitted); 1 some did not;
2 a bad command line.
Environment: MTNLG_PYTHON (default /usr/bin/python3) runs scripts/metrics_summary.py.
USAGE
}

die() {
  echo "sweep.sh: $*" >&2
  exit 2
}

# split_values TEXT: prints the comma-separated values of TEXT one per line (rules in --help).
split_values() {
  local text=$1 value="" ch quote="" depth=0 i
  for ((i = 0; i < ${#text}; i++)); do
    ch=${text:i:1}
    if [[ -n $quote ]]; then
      [[ $ch == "$quote" ]] && quote=""
    elif [[ $ch == "\\" && ${text:i+1:1} == ',' ]]; then
      ch=','
      i=$((i + 1))
    elif [[ $ch == "'" || $ch == '"' ]]; then
      quote=$ch
    elif [[ $ch == '[' || $ch == '{' ]]; then
      depth=$((depth + 1))
    elif [[ $ch == ']' || $ch == '}' ]]; then
      depth=$((depth - 1))
      ((depth >= 0)) || return 1
    elif [[ $ch == ',' && $depth -eq 0 ]]; then
      [[ -n $value ]] || return 1
      printf '%s\n' "$value"
      value=""
      continue
    fi
    value+=$ch
  done
  [[ -z $quote && $depth -eq 0 && -n $value ]] || return 1
  printf '%s\n' "$value"
}

recipe=""
out_dir=""
use_sbatch=0
force=0
progress_s=30
bin=${MTNLG_TRAIN:-$repo_dir/build/mtnlg-train}
python=${MTNLG_PYTHON:-/usr/bin/python3}
sbatch_args=()
train_args=()
keys=()    # the swept keys, in order
offset=()  # offset[k]: index in values of key k's first value
count=()   # count[k]: how many values key k has
values=()
while (($#)); do
  case "$1" in
    --out)
      [[ $# -ge 2 ]] || die "--out needs a directory"
      out_dir=$2
      shift
      ;;
    --out=*) out_dir=${1#--out=} ;;
    --bin)
      [[ $# -ge 2 ]] || die "--bin needs the path of mtnlg-train"
      bin=$2
      shift
      ;;
    --bin=*) bin=${1#--bin=} ;;
    --sbatch) use_sbatch=1 ;;
    --sbatch-arg)
      [[ $# -ge 2 ]] || die "--sbatch-arg needs an sbatch option, e.g. --sbatch-arg=--partition=gpu"
      sbatch_args+=("$2")
      shift
      ;;
    --sbatch-arg=*) sbatch_args+=("${1#--sbatch-arg=}") ;;
    --progress)
      [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || die "--progress needs whole seconds, e.g. --progress 30"
      progress_s=$2
      shift
      ;;
    --progress=*)
      progress_s=${1#--progress=}
      [[ $progress_s =~ ^[0-9]+$ ]] || die "--progress needs whole seconds, e.g. --progress=30"
      ;;
    --force) force=1 ;;
    -h | --help) usage; exit 0 ;;
    --)
      shift
      train_args=("$@")
      break
      ;;
    -*) die "unknown option '$1' (see --help; mtnlg-train's own options go after --)" ;;
    *=*)
      key=${1%%=*}
      [[ $key =~ ^[A-Za-z0-9_.]+$ ]] ||
        die "'$1': the key '$key' is not a recipe key path like optimizer.lr"
      for k in "${keys[@]}"; do
        [[ $k != "$key" ]] || die "'$key' is listed twice; give all its values in one KEY=V1,V2"
      done
      parsed=$(split_values "${1#*=}") ||
        die "'$1': an empty value or unbalanced brackets/quotes (values are split at" \
          "commas outside [ ] { } and quotes; \\, is a literal comma)"
      mapfile -t vals <<<"$parsed"
      keys+=("$key")
      offset+=("${#values[@]}")
      count+=("${#vals[@]}")
      values+=("${vals[@]}")
      ;;
    *)
      [[ -z $recipe ]] || die "'$1': expected KEY=V1,V2,... (the recipe is already '$recipe')"
      recipe=$1
      ;;
  esac
  shift
done

[[ -n $recipe ]] || die "a recipe is required (see --help)"
[[ -f $recipe ]] || die "recipe '$recipe' not found"
[[ -x $bin ]] ||
  die "mtnlg-train not found at '$bin': build it (scripts/build.sh) or pass --bin PATH"
if ((use_sbatch)); then
  command -v sbatch >/dev/null || die "--sbatch: sbatch is not on PATH (run on a Slurm login node)"
fi
[[ -n $out_dir ]] || out_dir=runs/sweep-$(basename "${recipe%.*}")
mkdir -p "$out_dir"
# Absolute paths: a Slurm job may start elsewhere, and the resolved recipe should say where.
out_dir=$(cd "$out_dir" && pwd)
recipe=$(cd "$(dirname "$recipe")" && pwd)/$(basename "$recipe")
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
work_dir=$PWD
if ((use_sbatch)) && [[ "$out_dir$work_dir" =~ [[:space:]] ]]; then
  die "--sbatch: #SBATCH lines cannot hold paths with spaces ('$out_dir', '$work_dir')"
fi

total=1
for c in "${count[@]}"; do total=$((total * c)); done
last_index=$((total - 1))
width=${#last_index} # run indices are zero-padded so that `ls` lists them in order

# combination INDEX: sets the globals `sets` (KEY=VALUE per key) and `run_dir` for run INDEX.
sets=()
run_dir=""
combination() {
  local index=$1 rest=$1 k name
  sets=()
  local picks=()
  for ((k = ${#keys[@]} - 1; k >= 0; k--)); do
    picks[k]=$((offset[k] + rest % count[k]))
    rest=$((rest / count[k]))
  done
  name=$(printf '%0*d' "$width" "$index")
  for ((k = 0; k < ${#keys[@]}; k++)); do
    sets+=("${keys[k]}=${values[picks[k]]}")
    name+="-${keys[k]}=${values[picks[k]]}"
  done
  name=${name//[^A-Za-z0-9._+=-]/_}
  run_dir=$out_dir/${name:0:150}
}

# Writes a Slurm batch script for the current run to $run_dir/job.sbatch.
# shellcheck disable=SC2016 # the $status in the script is the job's, expanded when it runs
write_sbatch_script() {
  local job_name=${run_dir##*/}
  {
    echo '#!/bin/bash'
    echo "# Written by scripts/sweep.sh: run $index of $total of the sweep in $out_dir"
    echo "# ($(tr '\n' ' ' <"$run_dir/overrides.txt" | sed 's/ $//'))."
    echo "#SBATCH --job-name=sweep-${job_name:0:60}"
    echo "#SBATCH --output=$run_dir/train.log"
    echo "#SBATCH --chdir=$work_dir"
    echo '#SBATCH --nodes=1'
    echo '#SBATCH --ntasks-per-node=1'
    echo 'set -uo pipefail'
    echo 'status=0'
    # srun starts every task under Slurm's PMIx server; mtnlg-train bootstraps from PMIx.
    printf 'srun --mpi=pmix'
    printf ' %q' "${cmd[@]}"
    echo ' || status=$?'
    printf 'echo "$status" >%q\n' "$run_dir/exit_status"
    echo 'exit "$status"'
  } >"$run_dir/job.sbatch"
  chmod +x "$run_dir/job.sbatch"
}

# Every run directory first: refuse to mix a new sweep into an old one's files.
run_dirs=()
for ((index = 0; index < total; index++)); do
  combination "$index"
  run_dirs+=("$run_dir")
  if [[ -e $run_dir ]] && ((!force)); then
    die "$run_dir already exists: pass --force to reuse it (its old files are removed)" \
      "or choose another --out"
  fi
done

# An interrupted sweep stops its current run too.
train_pid=
trap 'echo "sweep.sh: interrupted" >&2; [[ -n $train_pid ]] && kill "$train_pid" 2>/dev/null; exit 130' INT TERM

# "iteration I of T (P%), loss L" from a run's metrics file so far ("starting" before any line).
progress_line() {
  local metrics=$1/metrics.jsonl total=$2
  [[ -s $metrics ]] || { echo "starting"; return; }
  "$python" - "$metrics" "$total" <<'PY' 2>/dev/null || echo "running"
import json, sys
last = None
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue  # a line being written
    if r.get("split") == "train":
        last = r
total = int(sys.argv[2])
if last is None:
    print("starting")
else:
    it = last["iteration"]
    pct = " (%d%%)" % (100 * it // total) if total > 0 else ""
    print("iteration %d of %s%s, loss %.4f" % (it, total if total > 0 else "?", pct, last["loss"]))
PY
}

echo "sweep.sh: $total run(s) of $recipe in $out_dir$( ((use_sbatch)) && echo ' (Slurm jobs)')"
failures=0
for ((index = 0; index < total; index++)); do
  combination "$index"
  mkdir -p "$run_dir"
  rm -f "$run_dir"/{metrics.jsonl,resolved_recipe.yaml,train.log,overrides.txt,command.txt} \
    "$run_dir"/{exit_status,job.sbatch,submit.log,slurm_job_id}
  : >"$run_dir/overrides.txt"
  ((${#sets[@]} == 0)) || printf '%s\n' "${sets[@]}" >"$run_dir/overrides.txt"
  cmd=("$bin" --config "$recipe" "${train_args[@]}")
  for s in "${sets[@]}"; do cmd+=(--set "$s"); done
  cmd+=(--set "logging.metrics_file=$run_dir/metrics.jsonl")
  # A recipe that checkpoints would have every run save into (and resume from) one directory;
  # the plan's iteration count measures progress. (--dry-run exits 5 for a plan that does not
  # fit a GPU: its JSON is printed all the same.)
  plan_fields=$("${cmd[@]}" --dry-run --no-data-check --json 2>/dev/null |
    /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin)
print(d.get("iterations", 0)); print(d.get("checkpoint_dir", ""))' 2>/dev/null || true)
  planned_iters=$(sed -n 1p <<<"$plan_fields")
  ckpt_dir=$(sed -n 2p <<<"$plan_fields")
  [[ -z $ckpt_dir ]] || cmd+=(--set "checkpoint.dir=$run_dir/checkpoints")
  printf '%q ' "${cmd[@]}" | sed 's/ $//' >"$run_dir/command.txt"
  echo >>"$run_dir/command.txt"
  label=$(tr '\n' ' ' <"$run_dir/overrides.txt" | sed 's/ $//')

  if ((use_sbatch)); then
    write_sbatch_script
    status=0
    sbatch --parsable "${sbatch_args[@]}" "$run_dir/job.sbatch" >"$run_dir/submit.log" 2>&1 ||
      status=$?
    job_id=$(head -n 1 "$run_dir/submit.log" | cut -d ';' -f 1)
    if ((status == 0)) && [[ $job_id =~ ^[0-9]+$ ]]; then
      echo "$job_id" >"$run_dir/slurm_job_id"
      echo "sweep.sh: run $index ($label): submitted as job $job_id"
    else
      echo "sweep.sh: run $index ($label): sbatch failed (exit $status):" \
        "$(tail -n 1 "$run_dir/submit.log")" >&2
      failures=$((failures + 1))
    fi
    continue
  fi

  echo "sweep.sh: run $index of $total ($label) -> $run_dir"
  status=0
  started=$SECONDS
  "${cmd[@]}" >"$run_dir/train.log" 2>&1 </dev/null &
  train_pid=$!
  next=$((SECONDS + progress_s))
  while kill -0 "$train_pid" 2>/dev/null; do
    sleep 1
    if ((progress_s > 0 && SECONDS >= next)); then
      echo "sweep.sh: run $index of $total ($label): $(progress_line "$run_dir" "${planned_iters:-0}")," \
        "$((SECONDS - started)) s"
      next=$((SECONDS + progress_s))
    fi
  done
  wait "$train_pid" || status=$?
  train_pid=
  echo "$status" >"$run_dir/exit_status"
  ((status != 0)) || echo "sweep.sh: run $index of $total ($label): done in" \
    "$((SECONDS - started)) s, $(progress_line "$run_dir" "${planned_iters:-0}")"
  if ((status != 0)); then
    last=$(grep -v '^[[:space:]]*$' "$run_dir/train.log" | tail -n 1 || true)
    echo "sweep.sh: run $index ($label) FAILED with exit status $status: $last" >&2
    failures=$((failures + 1))
  fi
done

echo
"$python" "$script_dir/metrics_summary.py" "${run_dirs[@]}" || failures=$((failures + 1))
if ((failures)); then
  echo "sweep.sh: $failures of $total run(s) failed"
  exit 1
fi
echo "sweep.sh: all $total run(s) $( ((use_sbatch)) && echo submitted || echo succeeded)"
