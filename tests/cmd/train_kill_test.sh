#!/usr/bin/env bash
# A rank killed mid-run: 4 ranks of mtnlg-train under mpirun (tp 2 x dp 2 with ZeRO-1, then
# pp 2 x dp 2) train the tiny recipe with parallel.timeout_s=10; once rank 0 has logged a few
# iterations one non-zero rank is SIGKILLed. Every other rank must exit on its own, non-zero and
# not by a signal, within the bound below (from the timeout), with an error naming the group, the operation
# and a peer; at least one survivor must name the killed rank. Third case: a rank SIGSTOPped (hung,
# its connections open) must make the others fail the same way after parallel.timeout_s.
# Usage: tests/cmd/train_kill_test.sh BUILD_DIR SOURCE_DIR
# Each rank runs under a bash wrapper that starts mtnlg-train in the background (its pid is the
# one killed), records its exit status and end time, and exits 0, so that mpirun does not abort
# the job on the first failure; --enable-recovery keeps mpirun from killing the survivors when a
# rank dies without PMIx_Finalize (as tests/parallel/pmix_kill_test.sh does).
set -u
bin=$1/mtnlg-train
src=$2
tmp=$(mktemp -d)
mpirun_pid=
cleanup() {
  [ -n "$mpirun_pid" ] && kill "$mpirun_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "$src" || exit 1
/usr/bin/python3 tests/cmd/make_tiny_corpus.py "$tmp/corpus" 400 512 || exit 1

# Time limits are derived from parallel.timeout_s and from this run's own iteration times, not
# guessed for the machine (4 ranks on 2 loaded cores run slowly and unevenly):
# - every wait of a rank is bounded by timeout_s, and a survivor's wait can chain through at most
#   np - 1 ranks (it waits on a live rank that waits on the dead one), each hop ending when the
#   rank before it exits; add the slowest logged iteration (the work a rank may still do before
#   it enters its last wait). That bounds every survivor's exit after the kill or the stop.
# - a hung rank must not be given up on early: a survivor waiting on it exits no sooner than
#   timeout_s after the stop, less one iteration (its wait may have begun just before).
# - mpirun as a whole is only bounded against a hang: start-up (the rendezvous waits are bounded
#   by timeout_s too, 3 iterations are logged) plus the exit bound; CTest's TIMEOUT is the sum
#   over the three cases (tests/extra_tests.cmake).
np=4
timeout_s=10
start_limit_s=$((6 * timeout_s))
status=0
fail() {
  echo "FAIL: $*"
  status=1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# NAME TP PP VICTIM SIGNAL [extra --set ...]: SIGNAL KILL (a dead rank) or STOP (a hung one)
run_case() {
  local name=$1 tp=$2 pp=$3 victim=$4 signal=$5
  shift 5
  local dir=$tmp/$name
  mkdir -p "$dir"
  local args=(--config configs/tiny.yaml --threads 1 --log-level info
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set "data.split=[9,1,0]"
    --set schedule.train_iters=100000
    --set parallel.micro_batch_size=1 --set batch.global_batch_size=4
    --set parallel.tensor="$tp" --set parallel.pipeline="$pp" --set data.cache_dir="$tmp/cache"
    --set parallel.timeout_s=$timeout_s --set logging.metrics_file="$dir/metrics.jsonl" "$@")
  # $0: the run's folder; the rest: the command. Status and end time go to files (not stdout:
  # mpirun may be gone by then).
  local wrapper='d=$0; r=$PMIX_RANK
    "$@" >"$d/log.$r" 2>&1 &
    pid=$!
    echo "$pid" >"$d/pid.$r"
    wait "$pid"
    rc=$?
    echo $(($(date +%s%N) / 1000000)) >"$d/end.$r"
    echo "$rc" >"$d/rc.$r"
    exit 0'
  echo "--- $name: tp $tp, pp $pp, dp $((4 / tp / pp)); SIG$signal to rank $victim"
  timeout $((start_limit_s + np * timeout_s + 10)) mpirun --enable-recovery --oversubscribe --allow-run-as-root -np $np \
    bash -c "$wrapper" "$dir" "$bin" "${args[@]}" >"$dir/mpirun.log" 2>&1 &
  mpirun_pid=$!
  # Rank 0 writes one metrics line per iteration: wait for 3.
  local waited=0
  while [ "$(cat "$dir/metrics.jsonl" 2>/dev/null | wc -l)" -lt 3 ]; do
    if ! kill -0 "$mpirun_pid" 2>/dev/null || [ $waited -ge $((start_limit_s * 10)) ]; then
      fail "$name: no 3 iterations logged after $((waited / 10)) s"
      cat "$dir/mpirun.log" "$dir"/log.* 2>/dev/null | tail -40
      wait "$mpirun_pid"
      mpirun_pid=
      return
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  # The slowest iteration so far, in ms (elapsed_ms of rank 0's metrics lines).
  local iter_ms
  iter_ms=$(grep -o '"elapsed_ms": [0-9.]*' "$dir/metrics.jsonl" | awk '{ if ($2 > m) m = $2 } END { printf "%d", m + 1 }')
  local limit_ms=$(((np - 1) * timeout_s * 1000 + iter_ms))
  local pid
  pid=$(cat "$dir/pid.$victim")
  local killed_at
  killed_at=$(now_ms)
  kill -"$signal" "$pid"
  if [ "$signal" = STOP ]; then
    # The survivors must give up on their own; then the hung rank is killed to end the job.
    local rank_done
    for ((i = 0; i < limit_ms / 100 + 1; ++i)); do
      rank_done=0
      for r in 0 1 2 3; do [ -f "$dir/rc.$r" ] && rank_done=$((rank_done + 1)); done
      [ $rank_done -ge 3 ] && break
      sleep 0.1
    done
    kill -KILL "$pid"
  fi
  wait "$mpirun_pid"
  local mpirun_rc=$?
  mpirun_pid=
  echo "mpirun rc $mpirun_rc after $(($(now_ms) - killed_at)) ms from the kill;" \
    "$(wc -l <"$dir/metrics.jsonl") iterations logged"
  [ "$mpirun_rc" -eq 124 ] && fail "$name: the job hung"
  [ "$(cat "$dir/rc.$victim" 2>/dev/null)" = 137 ] || fail "$name: rank $victim was not killed"
  local named_victim=0
  for r in 0 1 2 3; do
    [ "$r" -eq "$victim" ] && continue
    local rc end error
    rc=$(cat "$dir/rc.$r" 2>/dev/null || echo none)
    end=$(cat "$dir/end.$r" 2>/dev/null || echo $((killed_at + 999999)))
    error=$(grep -m1 "\[error\]" "$dir/log.$r")
    echo "rank $r: exit $rc after $((end - killed_at)) ms: $error"
    if [[ ! $rc =~ ^[0-9]+$ ]] || [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then
      fail "$name: rank $r exited with '$rc', not an error of its own"
      tail -20 "$dir/log.$r"
    fi
    [ $((end - killed_at)) -le $limit_ms ] ||
      fail "$name: rank $r took longer than (np - 1) x timeout_s + the slowest iteration = $limit_ms ms"
    if [ "$signal" = STOP ] && [ $((end - killed_at)) -lt $((timeout_s * 1000 - iter_ms)) ]; then
      fail "$name: rank $r gave up on the hung rank after $((end - killed_at)) ms, before timeout_s"
    fi
    grep -Eq "(all_reduce|reduce_scatter|all_gather|broadcast|send|recv|barrier) of .* on group '[a-z-]+' .*peer rank [0-9]+ \(global rank [0-9]+\)" <<<"$error" ||
      fail "$name: rank $r's error does not name the group, the operation and a peer"
    grep -q "(global rank $victim)" <<<"$error" && named_victim=1
  done
  [ $named_victim -eq 1 ] || fail "$name: no survivor names rank $victim"
}

run_case tp2-dp2-zero1 2 1 1 KILL --set parallel.zero_stage=1
run_case pp2-dp2 1 2 2 KILL
# A hung rank (stopped, its sockets open): the others must time out after parallel.timeout_s.
run_case tp2-dp2-hung 2 1 3 STOP
[ $status -eq 0 ] && echo "PASS"
exit $status
