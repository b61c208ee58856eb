#!/usr/bin/env bash
# OpenMP's wait policy under mpirun (cmd/openmp_policy.h): 2 ranks asking for 2 threads each on a
# node of fewer than 4 cores re-execute with OMP_WAIT_POLICY=passive (logged) and train; a policy
# the user set is kept; 1 thread each is left alone. Skipped (77) on a machine of 4 or more cores,
# where 2 x 2 threads do not oversubscribe.
# Usage: tests/cmd/openmp_policy_cli_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"
(($(nproc) < 4)) || { echo "skipped: $(nproc) cores"; exit 77; }
unset OMP_WAIT_POLICY MTNLG_OPENMP_REEXEC
run() {  # NAME THREADS [env...]: 2 ranks, tensor 2, 3 iterations; the log in $tmp/NAME.log
  local name=$1 threads=$2
  shift 2
  env "$@" mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 "$bin" \
    --config configs/tiny.yaml --threads "$threads" --log-level info \
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache" \
    --set parallel.tensor=2 --set schedule.train_iters=3 \
    --set logging.metrics_file="$tmp/$name/metrics.jsonl" >"$tmp/$name.log" 2>&1
  grep -q "done: 3 iterations" "$tmp/$name.log" || { echo "FAIL: $name did not train"; cat "$tmp/$name.log"; exit 1; }
}
run over 2
[[ $(grep -c "OMP_WAIT_POLICY=passive: 2 ranks x 2 threads on $(nproc) cores" "$tmp/over.log") == 2 ]] ||
  { echo "FAIL: no passive policy logged by both ranks"; cat "$tmp/over.log"; exit 1; }
# The re-executed ranks keep their name (ps, pgrep and the stop-signal tests find them by it).
# A run that cannot end before it is looked at (100,000 iterations, killed below): on this loaded
# 2-core machine a poll loop can wait seconds for a CPU while the ranks train.
mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 "$bin" --config configs/tiny.yaml \
  --threads 2 --log-level info --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" \
  --set data.cache_dir="$tmp/cache" --set parallel.tensor=2 --set schedule.train_iters=100000 \
  --set logging.metrics_file="$tmp/long/metrics.jsonl" >"$tmp/long.log" 2>&1 &
job=$!
# Whatever happens below, this run's ranks do not outlive the test.
trap 'kill "$job" 2>/dev/null || true; pkill -f -- "$tmp/long/metrics.jsonl" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 200); do
  [[ -s $tmp/long/metrics.jsonl ]] && break
  sleep 0.05
done
# This run's ranks (other tests may run mtnlg-train at the same time), by their own name.
named=0
for pid in $(pgrep -f -- "$tmp/long/metrics.jsonl"); do
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == mtnlg-train ]] && named=$((named + 1))
done
kill "$job" 2>/dev/null
wait "$job" 2>/dev/null || true
pkill -f -- "$tmp/long/metrics.jsonl" 2>/dev/null || true
((named == 2)) || { echo "FAIL: $named processes named mtnlg-train after the re-exec"; cat "$tmp/long.log"; exit 1; }
run user 2 OMP_WAIT_POLICY=active
! grep -q "OMP_WAIT_POLICY=passive" "$tmp/user.log" || { echo "FAIL: the user's policy was replaced"; exit 1; }
run fits 1
! grep -q "OMP_WAIT_POLICY=passive" "$tmp/fits.log" || { echo "FAIL: 1 thread per rank re-executed"; exit 1; }
echo "openmp_policy_cli_test: ok"
