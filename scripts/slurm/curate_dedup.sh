#!/usr/bin/env bash
# Submits mtnlg-curate's fuzzy dedup as three Slurm jobs (scripts/slurm/curate.sbatch): the
# signatures as an array of TASKS, the components after them, the kept shards as an array of
# TASKS after that, from the current directory (where the jobs' slurm-*.out files go). Prints
# the three job ids; with --wait, waits for the last and exits with its status.
#
#   scripts/slurm/curate_dedup.sh [--wait] TASKS DEDUP_ARGS...
#   scripts/slurm/curate_dedup.sh 64 --input cc=cc-00.jsonl.zst ... --priority wiki,cc \
#       --output-dir dedup --report dedup/groups.jsonl --work-dir /shared/dedup-work
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
wait=()
if [[ ${1:-} == --wait ]]; then
  wait=(--wait)
  shift
fi
tasks=${1:?usage: curate_dedup.sh [--wait] TASKS DEDUP_ARGS...}
shift
[[ $tasks =~ ^[1-9][0-9]*$ ]] || { echo "curate_dedup.sh: TASKS must be a positive number, got '$tasks'" >&2; exit 2; }
last=$((tasks - 1))
sig=$(sbatch --parsable --array=0-"$last" "$here/curate.sbatch" signatures "$@")
comp=$(sbatch --parsable --dependency=afterok:"$sig" "$here/curate.sbatch" components "$@")
echo "signatures $sig"
echo "components $comp"
out=$(sbatch --parsable "${wait[@]}" --dependency=afterok:"$comp" --array=0-"$last" \
  "$here/curate.sbatch" output "$@") || { echo "output ${out:-} failed"; exit 1; }
echo "output $out"
