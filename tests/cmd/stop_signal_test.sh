#!/usr/bin/env bash
# Stops: a stop signal or schedule.exit_duration_minutes saves a checkpoint at the next iteration
# boundary and exits 75; the resumed run continues bit for bit.
#  1. SIGTERM to one non-zero rank of 4 (pipeline 2 x data 2, ZeRO-1) mid-run: every rank agrees,
#     the job exits 75 with a committed checkpoint; resumed, it logs the same losses as the run
#     that never stopped;
#  2. SIGUSR1 to one process: exit 75, saved;
#  3. SIGINT without checkpoint.dir: exit 130 (128 + 2), "nothing was saved";
#  4. schedule.exit_duration_minutes: exit 75, saved.
# Usage: tests/cmd/stop_signal_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"

common=(--set parallel.micro_batch_size=1 --set batch.global_batch_size=4
  --set schedule.decay_tokens=20000 --set "data.split=[9,1,0]" --set eval.interval=50
  --set eval.iters=1)

# Waits (up to 60 s) until FILE has at least N lines.
wait_lines() {
  for _ in $(seq 600); do
    [[ -f $1 && $(wc -l <"$1") -ge $2 ]] && return 0
    sleep 0.1
  done
  echo "FAIL: $1 never reached $2 lines" >&2
  return 1
}

# NAME EXPECTED_STATUS SIGNAL NP [args]: runs in the background, signals one rank (the last
# started) once 3 iterations are logged, checks the exit status.
signal_run() {
  local name=$1 want=$2 sig=$3 np=$4
  shift 4
  local status=0
  run_layout "$name" "$np" "${common[@]}" "$@" >"$tmp/$name.log" 2>&1 &
  local launcher=$!
  wait_lines "$tmp/$name/metrics.jsonl" 3
  # The mtnlg-train processes of this run (not mpirun, not the shell): the newest one.
  local victim="" pid
  for pid in $(pgrep -f -- "logging.metrics_file=$tmp/$name/metrics.jsonl"); do
    [[ $(ps -o comm= -p "$pid" 2>/dev/null) == mtnlg-train ]] && victim=$pid
  done
  [[ -n $victim ]] || { echo "FAIL: no process of $name found"; return 1; }
  kill "-$sig" "$victim"
  wait "$launcher" || status=$?
  if [[ $status != "$want" ]]; then
    echo "FAIL: $name exited $status, expected $want after SIG$sig"
    tail -20 "$tmp/$name.log"
    return 1
  fi
  echo "ok: $name exited $status after SIG$sig"
}

echo "== 1. SIGTERM to one rank of 4"
ck=(--set checkpoint.dir="$tmp/term/ckpt" --set checkpoint.resume=true)
pp=(--set parallel.pipeline=2 --set parallel.zero_stage=1 --set schedule.train_iters=300)
signal_run term 75 TERM 4 "${pp[@]}" "${ck[@]}"
grep -q "received SIGTERM): checkpoint saved" "$tmp/term.log"
stopped=$(cat "$tmp/term/ckpt/latest_checkpointed_iteration.txt")
echo "stopped after iteration $stopped"
((stopped >= 3 && stopped < 300))
"$1/mtnlg-ckpt" verify "$tmp/term/ckpt" >/dev/null
run_layout term 4 "${common[@]}" "${pp[@]}" "${ck[@]}"
run_layout whole 4 "${common[@]}" "${pp[@]}"
/usr/bin/python3 tests/cmd/compare_layouts.py --exact "$tmp" whole:term

echo "== 2. SIGUSR1 to one process"
signal_run usr1 75 USR1 1 --set schedule.train_iters=100000 --set checkpoint.dir="$tmp/usr1/ckpt"
grep -q "received SIGUSR1): checkpoint saved" "$tmp/usr1.log"
"$1/mtnlg-ckpt" verify "$tmp/usr1/ckpt" >/dev/null

echo "== 3. SIGINT without checkpoint.dir"
signal_run int 130 INT 1 --set schedule.train_iters=100000
grep -q "received SIGINT): nothing was saved" "$tmp/int.log"

echo "== 4. schedule.exit_duration_minutes"
status=0
run_layout dur 1 "${common[@]}" --set schedule.train_iters=100000 \
  --set schedule.exit_duration_minutes=0.02 --set checkpoint.dir="$tmp/dur/ckpt" || status=$?
[[ $status == 75 ]] || { echo "FAIL: exit_duration_minutes exited $status"; exit 1; }
"$1/mtnlg-ckpt" verify "$tmp/dur/ckpt" >/dev/null
echo "stop_signal_test: ok"
