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
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"
job=
trap '[[ -n $job ]] && scancel "$job" 2>/dev/null; rm -rf "$tmp"' EXIT

# 8000 iterations (about 20 s over shared memory): the signal travels scancel -> slurmctld ->
# slurmd -> the batch shell -> srun -> the tasks, which took 100-300 iterations on an idle machine
# and, once in CI on a loaded one, longer than the 2000 iterations this test used to run.
args=(--set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache"
  --set schedule.train_iters=8000 --set schedule.decay_tokens=40000
  --set parallel.micro_batch_size=1 --set checkpoint.dir="$tmp/ck" --set checkpoint.resume=true
  --log-level warn)
state() { scontrol show job "$job" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

job=$(MTNLG_TRAIN=$bin sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 \
  --output="$tmp/job.out" scripts/slurm/small.sbatch configs/tiny.yaml \
  --set logging.metrics_file="$tmp/job/metrics.jsonl" "${args[@]}")
echo "submitted job $job"
# Signal only once training runs: a loaded machine may start the job late, and a signal before
# mtnlg-train starts would not stop it.
running() { [[ -f $tmp/job/metrics.jsonl && $(wc -l <"$tmp/job/metrics.jsonl") -ge 5 ]]; }
for _ in $(seq 3000); do
  running && break
  sleep 0.1
done
running || { echo "FAIL: the job logged no 5 iterations in 300 s"; cat "$tmp/job.out"; exit 1; }
scancel --batch --signal=USR1 "$job"
# Requeued: pending again with one restart.
for _ in $(seq 300); do
  scontrol show job "$job" | grep -q 'Restarts=1' && [[ $(state) == PENDING ]] && break
  sleep 0.1
done
if [[ $(state) == COMPLETED ]]; then
  # Say where the signal went: the batch shell's log (the forwarding line) and the last iteration.
  echo "FAIL: the job finished before the signal took effect; its output:"
  cat "$tmp/job.out"
  echo "metrics lines: $(wc -l <"$tmp/job/metrics.jsonl")"
  exit 1
fi
scontrol show job "$job" | grep -q 'Restarts=1' || { echo "FAIL: job not requeued"; cat "$tmp/job.out"; exit 1; }
stopped=$(cat "$tmp/ck/latest_checkpointed_iteration.txt")
echo "requeued after a checkpoint at iteration $stopped"
((stopped < 8000)) || { echo "FAIL: the job finished before the signal"; exit 1; }
# The first run's step daemon must be gone before the job runs again (its PMIx socket is named by
# job and step): what Slurm's two-minute hold guarantees, waited for here.
for _ in $(seq 300); do
  ls "$(dirname "$SLURM_CONF")"/slurmd/stepd.slurm.pmix."$job".* >/dev/null 2>&1 || break
  sleep 0.1
done
# And slurmd revokes the first run's credential with a time stamp in whole seconds, rejecting any
# credential of the job made no later than that second ("Job credential revoked", the job then
# ends FAILED without running: seen in CI, the requeued job started 0.15 s after the kill). Start
# it two seconds after the revocation at the earliest.
revoked=$(date +%s)
while (($(date +%s) < revoked + 2)); do sleep 0.1; done
scontrol update JobId="$job" StartTime=now
for _ in $(seq 3000); do
  s=$(state)
  [[ $s == COMPLETED || $s == FAILED || $s == CANCELLED || $s == TIMEOUT ]] && break
  sleep 0.1
done
cat "$tmp/job.out"
[[ $(state) == COMPLETED ]] || { echo "FAIL: the requeued job ended $(state)"; exit 1; }
grep -q "checkpoint saved (exit 75): requeueing job $job" "$tmp/job.out"
[[ $(cat "$tmp/ck/latest_checkpointed_iteration.txt") == 8000 ]]
job=
srun --mpi=pmix --kill-on-bad-exit=1 --time=5 -n 2 "$bin" --config configs/tiny.yaml --threads 1 \
  --set logging.metrics_file="$tmp/whole/metrics.jsonl" "${args[@]}" \
  --set checkpoint.dir="$tmp/whole-ck"
/usr/bin/python3 tests/cmd/compare_layouts.py --exact "$tmp" whole:job
echo "slurm_requeue_test: ok"
