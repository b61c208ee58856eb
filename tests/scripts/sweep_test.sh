#!/usr/bin/env bash
# End-to-end checks of scripts/sweep.sh and scripts/metrics_summary.py on the tiny recipe.
# Usage: tests/scripts/sweep_test.sh BUILD_DIR SOURCE_DIR CASE
#   CASE local: a two-point sweep runs both and summarises them
#        failure: a failing combination is reported, the other still runs, exit status 1
#        sbatch: --sbatch writes and submits batch scripts (fake sbatch; the script then runs
#                under a fake srun)
#        cli: --help, value splitting, bad command lines
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
case_name=$3
sweep=$src/scripts/sweep.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PYTHONDONTWRITEBYTECODE=1 # imports from scripts/ leave no __pycache__ in the source tree
source "$src/tests/cli_expect.sh" # check DESCRIPTION COMMAND...; counts $passes and $failures
# shellcheck disable=SC2317 # called through check
contains() { grep -Eq -- "$2" "$1"; } # contains FILE ERE

# The tiny corpus: 200 documents of random ids below the tiny recipe's 512-token vocabulary.
/usr/bin/python3 - "$src/scripts" "$tmp/corpus" <<'PY' || exit 1
import random, sys
sys.path.insert(0, sys.argv[1])
from prepare_demo_data import write_indexed_dataset
rng = random.Random(7)
write_indexed_dataset(sys.argv[2], [[rng.randrange(512) for _ in range(20 + rng.randrange(60))]
                                    for _ in range(200)])
PY
common=(--bin "$build/mtnlg-train" --
  --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set "data.split=[9,1,0]"
  --set data.cache_dir="$tmp/cache" --set eval.interval=5 --set eval.iters=1 --threads 1)
cd "$tmp" || exit 1

case $case_name in
  checkpoints)
    # A recipe that checkpoints (and resumes): each run saves into its own RUNDIR/checkpoints,
    # never into the shared directory, so no run resumes from another's.
    status=0
    "$sweep" "$src/configs/tiny.yaml" optimizer.lr=1e-3,3e-3 schedule.train_iters=3 \
      --out "$tmp/sweep" "${common[@]}" --set checkpoint.dir="$tmp/shared-ck" \
      --set checkpoint.resume=true >"$tmp/out" 2>&1 || status=$?
    cat "$tmp/out"
    check "exit status 0 (got $status)" test "$status" -eq 0
    for lr in 1e-3 3e-3; do
      dir=$(ls -d "$tmp"/sweep/*-optimizer.lr=$lr-*)
      check "run lr=$lr: its own checkpoint at iteration 3" \
        contains "$dir/checkpoints/latest_checkpointed_iteration.txt" '^3$'
      check "run lr=$lr: 3 train lines (nothing resumed)" \
        test "$(grep -c '"split": "train"' "$dir/metrics.jsonl")" -eq 3
      check "run lr=$lr: the command names its directory" \
        contains "$dir/command.txt" "checkpoint\.dir=$dir/checkpoints"
    done
    check "the shared directory is not used" test ! -e "$tmp/shared-ck"
    ;;
  local)
    status=0
    "$sweep" "$src/configs/tiny.yaml" optimizer.lr=1e-3,3e-3 schedule.train_iters=5 \
      --out "$tmp/sweep" "${common[@]}" >"$tmp/out" 2>&1 || status=$?
    cat "$tmp/out"
    check "exit status 0 (got $status)" test "$status" -eq 0
    for i in 0 1; do
      lr=$([[ $i == 0 ]] && echo 1e-3 || echo 3e-3)
      dir=$tmp/sweep/$i-optimizer.lr=$lr-schedule.train_iters=5
      for f in metrics.jsonl resolved_recipe.yaml train.log overrides.txt command.txt; do
        check "$dir/$f exists" test -s "$dir/$f"
      done
      check "run $i exit_status 0" contains "$dir/exit_status" '^0$'
      check "run $i: no checkpoints without checkpoint.dir" test ! -e "$dir/checkpoints"
      check "run $i: 5 train lines" test "$(grep -c '"split": "train"' "$dir/metrics.jsonl")" -eq 5
      check "run $i: a valid line" contains "$dir/metrics.jsonl" '"split": "valid"'
      check "run $i: resolved lr" contains "$dir/resolved_recipe.yaml" "lr: 0\.00${lr:0:1}$"
      check "run $i: resolved train_iters" contains "$dir/resolved_recipe.yaml" 'train_iters: 5$'
      check "run $i: summary row" contains "$tmp/out" \
        "^\| optimizer\.lr=$lr schedule\.train_iters=5 +\| ok +\| [0-9]+\.[0-9]{4} +\| [0-9]+\.[0-9]{4} +\| [0-9]+ +\|$"
    done
    check "summary header" contains "$tmp/out" '^\| combination +\| status +\| final train loss +\| final valid loss +\| tokens/s +\|$'
    check "all succeeded" contains "$tmp/out" 'all 2 run\(s\) succeeded'
    # Each run's end: its time and where it got to (iteration 5 of the plan's 5).
    check "run end line" contains "$tmp/out" \
      '^sweep\.sh: run 0 of 2 \(optimizer\.lr=1e-3 schedule\.train_iters=5\): done in [0-9]+ s, iteration 5 of 5 \(100%\), loss [0-9]+\.[0-9]{4}$'
    # Progress while a run goes: a longer run, a line every second.
    "$sweep" "$src/configs/tiny.yaml" schedule.train_iters=1500 --progress 1 \
      --out "$tmp/progress" "${common[@]}" >"$tmp/progress.out" 2>&1
    check "progress lines" contains "$tmp/progress.out" \
      '^sweep\.sh: run 0 of 1 \(schedule\.train_iters=1500\): (starting|iteration [0-9]+ of 1500 \([0-9]+%\), loss [0-9.]+), [0-9]+ s$'
    expect_fail() { ! "$sweep" "$src/configs/tiny.yaml" schedule.train_iters=1 "$@" >/dev/null 2>&1; }
    check "--progress takes whole seconds" expect_fail --progress x --out "$tmp/bad-progress"
    # The same directories again: refused, nothing run, unless --force.
    status=0
    "$sweep" "$src/configs/tiny.yaml" optimizer.lr=1e-3,3e-3 schedule.train_iters=5 \
      --out "$tmp/sweep" "${common[@]}" >"$tmp/again" 2>&1 || status=$?
    check "existing run directory: exit 2 (got $status)" test "$status" -eq 2
    check "existing run directory: --force named" contains "$tmp/again" 'already exists: pass --force'
    status=0
    "$sweep" "$src/configs/tiny.yaml" optimizer.lr=1e-3,3e-3 schedule.train_iters=5 --force \
      --out "$tmp/sweep" "${common[@]}" >/dev/null 2>&1 || status=$?
    check "--force reruns (got $status)" test "$status" -eq 0
    # metrics_summary.py on its own, on a directory without sweep files.
    mkdir "$tmp/plain"
    cp "$tmp/sweep/0-optimizer.lr=1e-3-schedule.train_iters=5/metrics.jsonl" "$tmp/plain/"
    /usr/bin/python3 "$src/scripts/metrics_summary.py" "$tmp/plain" "$tmp/sweep"/*/ >"$tmp/summary" 2>&1
    check "metrics_summary.py: exit 0" test $? -eq 0
    check "metrics_summary.py: plain row" contains "$tmp/summary" '^\| plain +\| unknown +\| [0-9.]+ +\| [0-9.]+ +\| [0-9]+ +\|$'
    check "metrics_summary.py: 3 rows" test "$(grep -c '^| ' "$tmp/summary")" -eq 4
    /usr/bin/python3 "$src/scripts/metrics_summary.py" "$tmp/nonexistent" >/dev/null 2>&1
    check "metrics_summary.py: missing directory exits 2" test $? -eq 2
    ;;

  failure)
    status=0
    "$sweep" "$src/configs/tiny.yaml" optimizer.lr=not_a_number,1e-3 \
      'optimizer.betas=[0.9,0.95]' --out "$tmp/sweep" "${common[@]}" \
      --set schedule.train_iters=5 >"$tmp/out" 2>&1 || status=$?
    cat "$tmp/out"
    bad=$tmp/sweep/0-optimizer.lr=not_a_number-optimizer.betas=_0.9_0.95_
    good=$tmp/sweep/1-optimizer.lr=1e-3-optimizer.betas=_0.9_0.95_
    check "exit status 1 (got $status)" test "$status" -eq 1
    check "failed run: exit_status 2" contains "$bad/exit_status" '^2$'
    check "failed run reported with its last log line" contains "$tmp/out" \
      'run 0 \(optimizer\.lr=not_a_number optimizer\.betas=\[0\.9,0\.95\]\) FAILED with exit status 2: .*optimizer\.lr'
    check "the next run still ran" test -s "$good/metrics.jsonl"
    check "the list value stayed one value" contains "$good/resolved_recipe.yaml" 'betas: \[0\.9, 0\.95\]$'
    check "summary: failed row" contains "$tmp/out" \
      '^\| optimizer\.lr=not_a_number optimizer\.betas=\[0\.9,0\.95\] +\| failed \(exit 2\) +\| - +\| - +\| - +\|$'
    check "summary: ok row" contains "$tmp/out" '^\| optimizer\.lr=1e-3 optimizer\.betas=\[0\.9,0\.95\] +\| ok +\| [0-9.]+ '
    check "summary: failure listed" contains "$tmp/out" "^  $bad: failed \(exit 2\): .*not_a_number"
    check "count of failures" contains "$tmp/out" '1 of 2 run\(s\) failed'
    ;;

  sbatch)
    # A fake sbatch records its arguments and a copy of the script; a fake srun runs the
    # command without Slurm, so the generated script is also run for real.
    mkdir "$tmp/bin"
    cat >"$tmp/bin/sbatch" <<'SH'
#!/usr/bin/env bash
n=$(($(cat "$FAKE_SLURM/count" 2>/dev/null || echo 0) + 1))
echo "$n" >"$FAKE_SLURM/count"
printf '%s\n' "$@" >"$FAKE_SLURM/args.$n"
[[ -z ${FAKE_SBATCH_FAIL:-} ]] || { echo "sbatch: error: invalid partition specified" >&2; exit 1; }
echo "$((1000 + n));cluster"
SH
    cat >"$tmp/bin/srun" <<'SH'
#!/usr/bin/env bash
[[ $1 == --mpi=pmix ]] || { echo "srun: expected --mpi=pmix first, got $1" >&2; exit 99; }
shift
exec "$@"
SH
    chmod +x "$tmp/bin/sbatch" "$tmp/bin/srun"
    mkdir "$tmp/slurm"
    export FAKE_SLURM=$tmp/slurm
    status=0
    PATH=$tmp/bin:$PATH "$sweep" "$src/configs/tiny.yaml" optimizer.lr=1e-3,3e-3 \
      schedule.train_iters=5 --sbatch --sbatch-arg=--partition=gpu --sbatch-arg --time=0:10:00 \
      --out "$tmp/sweep" "${common[@]}" >"$tmp/out" 2>&1 || status=$?
    cat "$tmp/out"
    check "exit status 0 (got $status)" test "$status" -eq 0
    check "two submissions" contains "$tmp/slurm/count" '^2$'
    for i in 0 1; do
      lr=$([[ $i == 0 ]] && echo 1e-3 || echo 3e-3)
      dir=$tmp/sweep/$i-optimizer.lr=$lr-schedule.train_iters=5
      job=$dir/job.sbatch
      n=$((i + 1))
      check "sbatch $n args" diff <(printf '%s\n' --parsable --partition=gpu --time=0:10:00 "$job") \
        "$tmp/slurm/args.$n"
      check "job id $((1000 + n)) recorded" contains "$dir/slurm_job_id" "^$((1000 + n))$"
      check "submitted line" contains "$tmp/out" "run $i .*submitted as job $((1000 + n))"
      check "summary: submitted" contains "$tmp/out" "^\| optimizer\.lr=$lr schedule\.train_iters=5 +\| submitted \(job $((1000 + n))\) "
      check "script: shebang" test "$(head -n 1 "$job")" == '#!/bin/bash'
      check "script: output" contains "$job" "^#SBATCH --output=$dir/train\.log$"
      check "script: chdir" contains "$job" "^#SBATCH --chdir=$tmp$"
      check "script: job name" contains "$job" "^#SBATCH --job-name=sweep-$i-optimizer\.lr=$lr"
      check "script: nodes" contains "$job" '^#SBATCH --nodes=1$'
      check "script: srun --mpi=pmix" contains "$job" "^srun --mpi=pmix $build/mtnlg-train --config $src/configs/tiny\.yaml "
      check "script: --set lr" contains "$job" " --set optimizer\.lr=$lr "
      check "script: --set metrics" contains "$job" " --set logging\.metrics_file=$dir/metrics\.jsonl \|\| status=\\\$\?$"
      check "script: exit_status" contains "$job" "^echo \"\\\$status\" >$dir/exit_status$"
      check "script: bash -n" bash -n "$job"
      check "script: #SBATCH lines before the first command" test \
        "$(grep -n '^#SBATCH' "$job" | tail -n 1 | cut -d: -f1)" -lt "$(grep -n '^set ' "$job" | cut -d: -f1)"
      # Run the job as Slurm would (stdout to --output), with the fake srun.
      (cd "$tmp" && PATH=$tmp/bin:$PATH bash "$job" >"$dir/train.log" 2>&1)
      check "job ran: exit 0" test $? -eq 0
      check "job ran: exit_status 0" contains "$dir/exit_status" '^0$'
      check "job ran: metrics" test "$(grep -c '"split": "train"' "$dir/metrics.jsonl")" -eq 5
      check "job ran: resolved recipe" test -s "$dir/resolved_recipe.yaml"
    done
    /usr/bin/python3 "$src/scripts/metrics_summary.py" "$tmp/sweep"/*/ >"$tmp/summary"
    check "summary after the jobs: two ok rows" test "$(grep -Ec '\| ok +\| [0-9]' "$tmp/summary")" -eq 2
    # sbatch refusing a job: reported, exit 1.
    status=0
    FAKE_SBATCH_FAIL=1 PATH=$tmp/bin:$PATH "$sweep" "$src/configs/tiny.yaml" optimizer.lr=1e-3 \
      --sbatch --out "$tmp/sweep2" "${common[@]}" >"$tmp/out2" 2>&1 || status=$?
    cat "$tmp/out2"
    check "sbatch failure: exit 1 (got $status)" test "$status" -eq 1
    check "sbatch failure: reported" contains "$tmp/out2" 'sbatch failed \(exit 1\): sbatch: error: invalid partition'
    check "sbatch failure: summary" contains "$tmp/out2" '\| submit failed '
    ;;

  cli)
    "$sweep" --help >"$tmp/help" 2>&1
    check "--help exits 0" test $? -eq 0
    for word in --out --sbatch --bin --force 'srun --mpi=pmix' 'brackets' 'Exit status'; do
      check "--help mentions $word" contains "$tmp/help" "$word"
    done
    expect_usage() { # expect_usage PATTERN ARGS...: exit 2 and a message matching PATTERN
      local pattern=$1 status=0
      shift
      "$sweep" "$@" >"$tmp/usage" 2>&1 || status=$?
      check "sweep.sh $* -> exit 2 (got $status)" test "$status" -eq 2
      check "sweep.sh $* -> /$pattern/" contains "$tmp/usage" "$pattern"
    }
    expect_usage 'a recipe is required'
    expect_usage "recipe 'nope.yaml' not found" nope.yaml a=1
    expect_usage 'mtnlg-train not found' "$src/configs/tiny.yaml" a=1 --bin "$tmp/none"
    expect_usage 'unbalanced' "$src/configs/tiny.yaml" 'optimizer.betas=[0.9,0.95' --bin "$build/mtnlg-train"
    expect_usage 'empty value' "$src/configs/tiny.yaml" 'optimizer.lr=1e-3,,2e-3' --bin "$build/mtnlg-train"
    expect_usage 'listed twice' "$src/configs/tiny.yaml" a=1 a=2 --bin "$build/mtnlg-train"
    expect_usage 'unknown option' "$src/configs/tiny.yaml" --threads 2 --bin "$build/mtnlg-train"
    expect_usage 'not a recipe key path' "$src/configs/tiny.yaml" 'a b=1' --bin "$build/mtnlg-train"
    # Value splitting: brackets, braces, quotes and \, keep commas inside one value; the run
    # directories are listed with --sbatch and a fake sbatch that accepts everything.
    mkdir "$tmp/bin"
    printf '#!/bin/sh\necho 7\n' >"$tmp/bin/sbatch"
    chmod +x "$tmp/bin/sbatch"
    PATH=$tmp/bin:$PATH "$sweep" "$src/configs/tiny.yaml" --sbatch --out "$tmp/split" \
      --bin "$build/mtnlg-train" 'a=[1,2],{x: 1, y: 2}' "b='p,q',3\,4" >/dev/null 2>&1
    check "splitting: exit 0" test $? -eq 0
    want=$'a=[1,2]\nb=\'p,q\'\na=[1,2]\nb=3,4\na={x: 1, y: 2}\nb=\'p,q\'\na={x: 1, y: 2}\nb=3,4'
    check "splitting: 4 runs, values intact" test "$(cat "$tmp/split"/*/overrides.txt)" == "$want"
    check "splitting: sanitised names" test -d "$tmp/split/3-a=_x__1__y__2_-b=3_4"
    ;;

  *)
    echo "unknown case '$case_name'"
    exit 2
    ;;
esac

echo "sweep $case_name: $passes passed, $failures failed"
exit $((failures > 0))
