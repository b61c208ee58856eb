#!/usr/bin/env bash
# Preemption under Slurm (the local cluster of scripts/slurm/cluster.sh; SLURM_CONF set): a
# 2-task job of scripts/slurm/small.sbatch is signalled as Slurm signals it before the time limit
# (SIGUSR1 to the batch shell, the sbatch file's --signal=B:USR1@180); mtnlg-train saves and exits
# 75, the job requeues itself, runs again (SLURM_RESTART_COUNT 1), resumes from the checkpoint and
# completes; its metrics equal, bit for bit, those of the same run under srun that never stopped.
# Slurm holds a requeued job for about two minutes before it is eligible; the test makes it
# eligible after two seconds (scontrol update StartTime=now), as an operator may.
# Usage: tests/cmd/slurm_requeue_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/slurm_lib.sh"
slurm_test_setup "$1" "$2"

# The race: the signal travels scancel -> slurmctld -> slurmd -> the batch shell -> srun -> the
# tasks, and on this 2-core machine each hop can wait seconds for a CPU while the job's two tasks
# train (scancel reached slurmctld 3.5 s after it was called, with the tasks pinned; a poll loop
# here stalled 9 s). Twice in CI the job trained all its iterations before the signal arrived.
# So the test pauses the tasks (SIGSTOP, a local kill) once they train, sends the signal through
# Slurm, waits until it is pending in both tasks, and lets them go on (SIGCONT): they stop at the
# next iteration boundary, whatever the machine's load. 8000 iterations (about 20 s) leave the
# poll loop room to see the first one.
args=(--set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache"
  --set schedule.train_iters=8000 --set schedule.decay_tokens=40000
  --set parallel.micro_batch_size=1 --set checkpoint.dir="$tmp/ck" --set checkpoint.resume=true
  --log-level warn)
state() { job_state "$job"; }
metrics=$tmp/job/metrics.jsonl
lines() { [[ -f $metrics ]] && wc -l <"$metrics" || echo 0; }
# The job's tasks: mtnlg-train processes whose command line names this job's metrics file.
tasks() {
  local p
  for p in $(pgrep -x mtnlg-train); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$metrics" && echo "$p"
  done
}
# SIGUSR1 (10, bit 9) pending for the process, sent to it (ShdPnd) or to one of its threads (SigPnd).
usr1_pending() {
  local f
  for f in $(awk '$1 == "ShdPnd:" || $1 == "SigPnd:" {print $2}' "/proc/$1/status" 2>/dev/null); do
    ((0x$f & 0x200)) && return 0
  done
  return 1
}

job=$(MTNLG_TRAIN=$bin sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 \
  --output="$tmp/job.out" scripts/slurm/small.sbatch configs/tiny.yaml \
  --set logging.metrics_file="$metrics" "${args[@]}")
echo "submitted job $job"
# Pause only once training runs (a metrics line: the stop handlers are installed; a stop signal
# before they are would end the process), and a loaded machine may start the job late.
for _ in $(seq 3000); do
  (($(lines) >= 1)) && break
  sleep 0.1
done
(($(lines) >= 1)) || { echo "FAIL: the job logged no iteration in 300 s"; cat "$tmp/job.out"; exit 1; }
mapfile -t pids < <(tasks)
((${#pids[@]} == 2)) || { echo "FAIL: found ${#pids[@]} training tasks of the job, not 2"; cat "$tmp/job.out"; exit 1; }
kill -STOP "${pids[@]}"
trap '[[ -n $job ]] && { kill -CONT "${pids[@]}" 2>/dev/null; scancel "$job" 2>/dev/null; }; rm -rf "$tmp"' EXIT
paused=$(lines)
echo "tasks ${pids[*]} paused after $paused iterations; signalling the batch shell through Slurm"
scancel --batch --signal=USR1 "$job"
for p in "${pids[@]}"; do
  for _ in $(seq 1200); do
    usr1_pending "$p" && break
    sleep 0.1
  done
  usr1_pending "$p" || {
    echo "FAIL: SIGUSR1 did not reach task $p in 120 s (the batch shell's output says whether it" \
      "forwarded it to srun):"
    cat "$tmp/job.out"
    exit 1
  }
done
kill -CONT "${pids[@]}"
# Requeued: pending again with one restart.
wait_requeued "$job" || { echo "FAIL: job not requeued ($(state))"; cat "$tmp/job.out"; exit 1; }
stopped=$(cat "$tmp/ck/latest_checkpointed_iteration.txt")
echo "requeued after a checkpoint at iteration $stopped"
# At the boundary after the pause: the iteration then under way (its line may not have been written).
((stopped >= paused && stopped <= paused + 2)) ||
  { echo "FAIL: paused after $paused iterations but saved at $stopped"; exit 1; }
release_requeued "$job"
wait_job_end "$job" >/dev/null
cat "$tmp/job.out"
[[ $(state) == COMPLETED ]] || { echo "FAIL: the requeued job ended $(state)"; exit 1; }
grep -q "checkpoint saved (exit 75): requeueing job $job" "$tmp/job.out"
[[ $(cat "$tmp/ck/latest_checkpointed_iteration.txt") == 8000 ]]
job=
match_unstopped "${args[@]}"
echo "slurm_requeue_test: ok"
