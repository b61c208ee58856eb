#!/usr/bin/env bash
# A stop while the step starts (the local cluster of scripts/slurm/cluster.sh; SLURM_CONF set):
# Slurm's SIGUSR1 reaches scripts/slurm/requeue.sh, which forwards it to srun and so to the tasks,
# before they have their stop handlers; SIGUSR1's default action ends them and srun exits 138.
# The job must requeue (nothing trained was lost), run again and complete, with the metrics of a
# run that never stopped, bit for bit; before requeue.sh knew this case the job ended FAILED.
# The tasks are a wrapper that sleeps before it execs mtnlg-train on the first run, so that the
# signal lands in the start-up window every time (mtnlg-train's own window, from exec to its
# handlers, is a few milliseconds: the same class, seldom hit).
# Usage: tests/cmd/slurm_requeue_startup_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/slurm_lib.sh"
slurm_test_setup "$1" "$2"

cat >"$tmp/start.sh" <<WRAP
#!/usr/bin/env bash
# The first run's tasks start slowly (a large binary on a slow file system, say).
[[ \${SLURM_RESTART_COUNT:-0} == 0 ]] && { touch "$tmp/starting.\$SLURM_PROCID"; sleep 120; }
exec "$bin" "\$@"
WRAP
chmod +x "$tmp/start.sh"
args=(--set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache"
  --set schedule.train_iters=30 --set parallel.micro_batch_size=1 --set checkpoint.dir="$tmp/ck"
  --set checkpoint.resume=true --log-level warn)
job=$(MTNLG_TRAIN=$tmp/start.sh sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 \
  --output="$tmp/job.out" scripts/slurm/small.sbatch configs/tiny.yaml \
  --set logging.metrics_file="$tmp/job/metrics.jsonl" "${args[@]}")
echo "submitted job $job"
for _ in $(seq 3000); do
  [[ -f $tmp/starting.0 && -f $tmp/starting.1 ]] && break
  sleep 0.1
done
[[ -f $tmp/starting.0 && -f $tmp/starting.1 ]] ||
  { echo "FAIL: the job's tasks did not start in 300 s"; cat "$tmp/job.out"; exit 1; }
echo "both tasks are starting; signalling the batch shell through Slurm"
scancel --batch --signal=USR1 "$job"
wait_requeued "$job" ||
  { echo "FAIL: the job was not requeued ($(job_state "$job"))"; cat "$tmp/job.out"; exit 1; }
[[ ! -e $tmp/job/metrics.jsonl ]] || { echo "FAIL: the first run trained"; exit 1; }
release_requeued "$job"
end=$(wait_job_end "$job")
cat "$tmp/job.out"
[[ $end == COMPLETED ]] || { echo "FAIL: the requeued job ended $end"; exit 1; }
grep -q "the step ended by SIGUSR1 while starting" "$tmp/job.out" ||
  { echo "FAIL: requeue.sh did not say why it requeued"; exit 1; }
grep -q "stopped while starting (exit 138): requeueing job $job" "$tmp/job.out"
[[ $(cat "$tmp/ck/latest_checkpointed_iteration.txt") == 30 ]]
job=
match_unstopped "${args[@]}"
echo "slurm_requeue_startup_test: ok"
