# Sourced by the tests that requeue a job on the local Slurm cluster (scripts/slurm/cluster.sh;
# SLURM_CONF set): slurm_requeue_test.sh and slurm_requeue_startup_test.sh, which call
#   slurm_test_setup BUILD_DIR SOURCE_DIR
#                          layout_setup's bin, src, tmp and corpus; job (empty), whose job is
#                          cancelled at exit when the test leaves it set
#   job_state JOB          the job's state (RUNNING, PENDING, COMPLETED, ...)
#   wait_requeued JOB      waits up to 300 s for the job to be pending again after one restart
#   release_requeued JOB   makes the requeued job eligible now, once Slurm would run it
#   wait_job_end JOB       waits up to 300 s for the job to end; prints its state
#   match_unstopped ARGS   trains the tiny recipe on 2 ranks under srun with ARGS, never stopped
#                          ($tmp/whole), and requires the job's metrics ($tmp/job) bit for bit
#                          (uses layout_lib.sh's bin and tmp)
slurm_test_setup() {
  source "$2/tests/cmd/layout_lib.sh"
  layout_setup "$1" "$2"
  job=
  trap '[[ -n $job ]] && scancel "$job" 2>/dev/null; rm -rf "$tmp"' EXIT
}

job_state() { scontrol show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

wait_requeued() {
  local _
  for _ in $(seq 3000); do
    scontrol show job "$1" | grep -q 'Restarts=1' && [[ $(job_state "$1") == PENDING ]] && return 0
    sleep 0.1
  done
  return 1
}

# Slurm holds a requeued job for about two minutes before it is eligible; this makes it eligible
# as soon as that is safe, as an operator may (scontrol update StartTime=now).
release_requeued() {
  local job=$1 _
  # The first run's step daemon must be gone before the job runs again (its PMIx socket is named
  # by job and step): what Slurm's two-minute hold guarantees, waited for here.
  for _ in $(seq 300); do
    ls "$(dirname "$SLURM_CONF")"/slurmd/stepd.slurm.pmix."$job".* >/dev/null 2>&1 || break
    sleep 0.1
  done
  # And slurmd revokes the first run's credential with a time stamp in whole seconds, rejecting
  # any credential of the job made no later than that second ("Job credential revoked", the job
  # then ends FAILED without running: seen in CI, the requeued job started 0.15 s after the kill).
  # Start it two seconds after the revocation at the earliest.
  local revoked
  revoked=$(date +%s)
  while (($(date +%s) < revoked + 2)); do sleep 0.1; done
  scontrol update JobId="$job" StartTime=now
}

wait_job_end() {
  local s _
  for _ in $(seq 3000); do
    s=$(job_state "$1")
    [[ $s == COMPLETED || $s == FAILED || $s == CANCELLED || $s == TIMEOUT ]] && break
    sleep 0.1
  done
  job_state "$1"
}

match_unstopped() {
  srun --mpi=pmix --kill-on-bad-exit=1 --time=5 -n 2 "$bin" --config configs/tiny.yaml --threads 1 \
    --set logging.metrics_file="$tmp/whole/metrics.jsonl" "$@" --set checkpoint.dir="$tmp/whole-ck"
  /usr/bin/python3 tests/cmd/compare_layouts.py --exact "$tmp" whole:job
}
