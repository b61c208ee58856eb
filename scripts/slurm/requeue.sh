# Sourced by the sbatch files: runs the training step so that a preempted job comes back.
#
#   srun_requeueable srun ... mtnlg-train ...
#
# Runs the step in the background and waits for it. SIGUSR1 (sbatch --signal=B:USR1@180: Slurm
# warns the batch shell 180 s before the time limit) and SIGTERM (scancel, preemption) reach this
# shell only; they are forwarded to the step as SIGUSR1, which srun passes to every task:
# mtnlg-train saves a checkpoint at the next iteration boundary and exits 75. On 75 the job
# requeues itself (scontrol requeue; the job needs --requeue) and the next run continues from the
# checkpoint (the recipe's checkpoint.resume: true). So does a step that the forwarded SIGUSR1
# ended while it was starting (below). Any other status is the job's.
# MTNLG_MAX_REQUEUES (default 100) bounds the chain (SLURM_RESTART_COUNT counts it).
srun_requeueable() {
  # The trap is in place before the step starts, so a signal that arrives while the step is being
  # started is remembered and forwarded once there is a step to forward it to.
  local step="" stop_asked=0
  # Forwarded as USR1: srun relays it to the tasks as is (a SIGTERM to srun would end the step).
  trap 'stop_asked=1; echo "requeue.sh: $(date +%T) stop signal: forwarding SIGUSR1 to the training step"; [[ -n $step ]] && kill -USR1 "$step" 2>/dev/null' USR1 TERM
  "$@" &
  step=$!
  ((stop_asked)) && kill -USR1 "$step" 2>/dev/null
  local status=0
  while :; do
    wait "$step" && status=0 || status=$?
    # A trapped signal interrupts wait (status > 128) while the step goes on: wait again.
    kill -0 "$step" 2>/dev/null || break
  done
  trap - USR1 TERM
  local why="checkpoint saved (exit 75)"
  # Ended by SIGUSR1 itself (128 + its number): the forwarded stop reached srun or a task before
  # it had its handler (srun starting, a wrapper, mtnlg-train before it installs its stop
  # handlers, which it does before any rank connects), whose default action ends the process. No
  # rank can train without the others, so nothing newer than the last checkpoint existed: the
  # stop was asked and honoured, and the job requeues as for 75 rather than ending FAILED.
  if ((stop_asked)) && [[ $status == $((128 + $(kill -l USR1))) ]]; then
    echo "requeue.sh: $(date +%T) the step ended by SIGUSR1 while starting, before its tasks" \
      "could save (exit $status); nothing trained since the last checkpoint is lost: treating it" \
      "as exit 75"
    why="stopped while starting (exit $status)"
    status=75
  fi
  if [[ $status == 75 ]]; then
    local restarts=${SLURM_RESTART_COUNT:-0}
    if ((restarts >= ${MTNLG_MAX_REQUEUES:-100})); then
      echo "requeue.sh: stopped ($why) after $restarts requeues" \
        "(MTNLG_MAX_REQUEUES); resubmit to continue" >&2
    elif [[ -n ${SLURM_JOB_ID:-} ]]; then
      echo "requeue.sh: $(date +%T) $why: requeueing job $SLURM_JOB_ID" \
        "(restart $((restarts + 1)))"
      # Requeueing a running job makes Slurm end this batch shell and then queue the job again.
      # Wait here to be ended rather than exit 75 at once: a batch shell that exits by itself
      # races the requeue, and when its non-zero status is taken after the job is pending again,
      # the job ends FAILED (seen on a loaded machine). If no end comes, the status is the step's.
      if scontrol requeue "$SLURM_JOB_ID"; then
        sleep "${MTNLG_REQUEUE_WAIT_S:-120}"
        echo "requeue.sh: the job was not ended ${MTNLG_REQUEUE_WAIT_S:-120} s after requeueing" >&2
      fi
    fi
  fi
  return "$status"
}
