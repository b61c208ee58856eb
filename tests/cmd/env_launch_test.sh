#!/usr/bin/env bash
# The environment launch (no PMIx: MTNLG_RANK, MTNLG_WORLD_SIZE, MTNLG_STORE_DIR) through
# scripts/launch.sh: tp 2 x dp 2 and pp 2 x dp 2 with ZeRO-1 train like one process; a store
# directory holding an earlier job's keys is refused naming it; a rank that fails before the
# rendezvous stops the ranks waiting for it without a launcher's help; a rank that fails stops the
# others and its status is the launcher's; SIGTERM to the launcher stops every rank with a
# checkpoint (exit 75); launch.sh's usage errors exit 2.
# Usage: tests/cmd/env_launch_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
launcher=env
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"

train() {  # NAME NP [extra --set ...]
  local name=$1 np=$2
  shift 2
  run_layout "$name" "$np" --set "data.split=[1,0,0]" --set schedule.train_iters=10 \
    --set parallel.micro_batch_size=2 "$@"
}
train single 1
train tp2-dp2 4 --set parallel.tensor=2
train pp2-dp2-zero1 4 --set parallel.pipeline=2 --set parallel.zero_stage=1
/usr/bin/python3 tests/cmd/compare_layouts.py "$tmp" single:tp2-dp2 single:pp2-dp2-zero1

# A kept store directory (--store-dir) holds that job's keys: launch.sh refuses to reuse it, and
# ranks started on it by another launcher fail naming it instead of reading stale addresses.
store=$tmp/store
train kept 2 --set parallel.tensor=2 >/dev/null 2>&1 || true  # warm the data cache
scripts/launch.sh -n 2 --store-dir "$store" -- "$bin" --config configs/tiny.yaml --threads 1 \
  --log-level warn --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" \
  --set data.cache_dir="$tmp/cache" --set schedule.train_iters=2 --set parallel.tensor=2 \
  --set logging.metrics_file="$tmp/kept/metrics.jsonl"
[[ -n $(ls -A "$store") ]] || { echo "FAIL: --store-dir was not kept"; exit 1; }
set +e
scripts/launch.sh -n 2 --store-dir "$store" -- true 2>"$tmp/reuse.err"
status=$?
set -e
[[ $status == 2 ]] && grep -q "not an empty directory" "$tmp/reuse.err" ||
  { echo "FAIL: reusing a store directory: status $status"; cat "$tmp/reuse.err"; exit 1; }
for r in 0 1; do
  MTNLG_RANK=$r MTNLG_WORLD_SIZE=2 MTNLG_STORE_DIR=$store "$bin" --config configs/tiny.yaml \
    --threads 1 --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" \
    --set data.cache_dir="$tmp/cache" --set schedule.train_iters=2 --set parallel.tensor=2 \
    --set parallel.timeout_s=20 --set logging.metrics_file="$tmp/stale/metrics.jsonl" \
    >"$tmp/stale.$r.log" 2>&1 &
  pids[$r]=$!
done
fails=0
for r in 0 1; do wait "${pids[$r]}" || fails=$((fails + 1)); done
[[ $fails == 2 ]] || { echo "FAIL: $fails of 2 ranks failed on a stale store"; exit 1; }
grep -q "already holds key.*earlier job" "$tmp"/stale.*.log ||
  { echo "FAIL: no rank named the stale store"; cat "$tmp"/stale.*.log; exit 1; }
grep -q "$store" "$tmp"/stale.*.log || { echo "FAIL: the error does not name $store"; exit 1; }

# A launcher of one's own that leaves the others running: rank 1 fails before its groups connect
# (its layout does not divide the world); rank 0, waiting for rank 1's keys, stops within
# seconds (not parallel.timeout_s), naming rank 1 (Runtime's failed@1 in the store directory).
store=$tmp/store-failed
mkdir "$store"
start=$SECONDS
for r in 0 1; do
  extra=()
  [[ $r == 1 ]] && extra=(--set parallel.data=2)
  MTNLG_RANK=$r MTNLG_WORLD_SIZE=2 MTNLG_STORE_DIR=$store "$bin" --config configs/tiny.yaml \
    --threads 1 --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" \
    --set data.cache_dir="$tmp/cache" --set schedule.train_iters=2 --set parallel.tensor=2 \
    --set parallel.timeout_s=300 --set logging.metrics_file="$tmp/failed/metrics.jsonl" \
    "${extra[@]}" >"$tmp/failed.$r.log" 2>&1 &
  pids[$r]=$!
done
statuses=()
for r in 0 1; do
  set +e
  wait "${pids[$r]}"
  statuses[$r]=$?
  set -e
done
((SECONDS - start < 60)) || { echo "FAIL: rank 0 waited $((SECONDS - start)) s for a failed rank"; exit 1; }
[[ ${statuses[*]} == "4 2" ]] ||
  { echo "FAIL: statuses ${statuses[*]}, not 4 2"; cat "$tmp"/failed.*.log; exit 1; }
grep -q "parallel.data" "$tmp/failed.1.log" ||
  { echo "FAIL: rank 1 did not name its key"; cat "$tmp/failed.1.log"; exit 1; }
grep -q "rank 1 stopped with an error" "$tmp/failed.0.log" ||
  { echo "FAIL: rank 0 did not name the failed rank"; cat "$tmp/failed.0.log"; exit 1; }

# A failing rank: the launcher stops the others (long before their 300 s) and exits with its status.
start=$SECONDS
set +e
scripts/launch.sh -n 3 -- bash -c '[[ $MTNLG_RANK == 1 ]] && exit 7; sleep 300' 2>"$tmp/fail.err"
status=$?
set -e
((SECONDS - start < 60)) || { echo "FAIL: the other ranks were not stopped"; exit 1; }
[[ $status == 7 ]] && grep -q "rank 1 exited with status 7" "$tmp/fail.err" ||
  { echo "FAIL: a failing rank gave status $status"; cat "$tmp/fail.err"; exit 1; }

# A rank that ignores SIGTERM after another failed gets SIGKILL once the grace period is over.
start=$SECONDS
set +e
scripts/launch.sh -n 2 --grace 1 -- \
  bash -c 'if [[ $MTNLG_RANK == 0 ]]; then sleep 0.5; exit 3; fi; trap "" TERM; exec sleep 300' \
  2>"$tmp/grace.err"
status=$?
set -e
((SECONDS - start < 60)) || { echo "FAIL: a rank ignoring SIGTERM was not killed"; exit 1; }
[[ $status == 3 ]] && grep -q "SIGKILL" "$tmp/grace.err" ||
  { echo "FAIL: grace period: status $status"; cat "$tmp/grace.err"; exit 1; }

# SIGTERM to the launcher reaches every rank: they save and exit 75 (the launcher's status), and
# the launcher does not call that a failure.
scripts/launch.sh -n 2 -- "$bin" --config configs/tiny.yaml --threads 1 --log-level warn \
  --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache" \
  --set schedule.train_iters=100000 --set parallel.tensor=2 --set checkpoint.dir="$tmp/ck" \
  --set logging.metrics_file="$tmp/stopped/metrics.jsonl" 2>"$tmp/stop.err" &
launcher_pid=$!
for _ in $(seq 600); do
  [[ -s $tmp/stopped/metrics.jsonl ]] && break
  sleep 0.1
done
[[ -s $tmp/stopped/metrics.jsonl ]] || { echo "FAIL: the launched run did not start training"; exit 1; }
kill -TERM "$launcher_pid"
set +e
wait "$launcher_pid"
status=$?
set -e
[[ $status == 75 ]] || { echo "FAIL: a stopped run gave status $status, not 75"; cat "$tmp/stop.err"; exit 1; }
[[ -f $tmp/ck/latest_checkpointed_iteration.txt ]] || { echo "FAIL: no checkpoint saved at the stop"; exit 1; }
if grep -q "stopping the others" "$tmp/stop.err"; then
  echo "FAIL: the launcher called a requested stop a failure"
  exit 1
fi

# Usage errors.
for bad in "-n 0 -- true" "-n two -- true" "-n 2" "--bogus -n 2 -- true" "-n 2 --grace x -- true"; do
  set +e
  # shellcheck disable=SC2086
  scripts/launch.sh $bad 2>/dev/null
  status=$?
  set -e
  [[ $status == 2 ]] || { echo "FAIL: launch.sh $bad exited $status, not 2"; exit 1; }
done
scripts/launch.sh --help | grep -q "MTNLG_STORE_DIR"
echo "env launch: ok"
