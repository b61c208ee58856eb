#!/usr/bin/env bash
# kill -9 at random moments of checkpoint saves: mtnlg-train saves every iteration
# (checkpoint.save_interval: 1, keep_last: 2, synchronous and asynchronous saves alternating) and
# is SIGKILLed a random 0-0.39 s after its first commit, over and over, resuming each time,
# until at least 20 kills have landed in runs that were saving. After every kill, every committed iter_ directory verifies
# (mtnlg-ckpt verify: each file present with its size and checksum), the metrics file holds a line
# for every iteration up to the committed one, and the next run resumes from the latest; at the
# end the run is finished and its metrics equal, bit for bit, those of a run that was never
# killed. Then the same with 2 ranks under mpirun (data 2, ZeRO-1: every rank writes a shard),
# one rank SIGKILLed at a random moment 6 times: no checkpoint is committed without every rank's
# files, and the finished run equals one that was never killed.
# Usage: tests/cmd/ckpt_kill_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"
ckpt=$1/mtnlg-ckpt
dir=$tmp/killed/ckpt
# hidden 256: a 20 MB checkpoint, so that most of the time goes to saving.
model=(--set model.hidden_size=256 --set schedule.train_iters=400 --set schedule.decay_tokens=60000)
ck=(--set checkpoint.dir="$dir" --set checkpoint.resume=true --set checkpoint.keep_last=2)
args=("${model[@]}" "${ck[@]}" --set checkpoint.save_interval=1)

landed=0 attempts=0 last=0
while ((landed < 20)); do
  ((++attempts <= 80)) || { echo "FAIL: only $landed kills landed in $attempts attempts"; exit 1; }
  async=$([[ $((attempts % 2)) == 0 ]] && echo true || echo false)
  # The trainer itself in the background (not a shell around it), so that the kill lands on it.
  "$bin" --config configs/tiny.yaml --threads 1 --log-level warn \
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set data.cache_dir="$tmp/cache" \
    --set logging.metrics_file="$tmp/killed/metrics.jsonl" "${args[@]}" \
    --set checkpoint.async=$async >/dev/null 2>&1 &
  pid=$!
  # Armed by progress, as the ranks' kills below: once this attempt has committed a checkpoint of
  # its own (it is in its saving loop), a random 0-0.39 s later. A fixed 0.1-0.7 s from the start
  # landed before the first save whenever the machine was busy (16 of 81 attempts in one CI run
  # beside other work), failing a test that checked nothing wrong.
  for _ in $(seq 600); do
    (($(cat "$dir/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0) > last)) && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  # Every committed checkpoint is whole.
  for d in "$dir"/iter_*; do
    [[ $d != *.tmp && -e $d/manifest.json ]] || continue
    "$ckpt" verify "$d" >/dev/null || { echo "FAIL: $d does not verify after kill $attempts"; exit 1; }
  done
  now=$(cat "$dir/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)
  # Every iteration up to the committed one has its metrics line on disk (written before the
  # commit), so that the resume, which cuts what came after, leaves one complete run.
  lines=$(/usr/bin/python3 -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    try:
        n += json.loads(l)["iteration"] <= int(sys.argv[2])
    except ValueError:
        pass
print(n)' "$tmp/killed/metrics.jsonl" "$now" 2>/dev/null || echo 0)
  ((lines == now)) || { echo "FAIL: $lines metrics lines up to committed iteration $now"; exit 1; }
  ((now > last)) && landed=$((landed + 1))
  last=$now
  ((now < 400)) || { echo "FAIL: the run finished before it was killed; slow it down"; exit 1; }
done
echo "ok: $landed of $attempts kills landed in a saving run; latest checkpoint: iteration $last"
leftover=$(ls -a "$dir" | grep -c '\.tmp$\|^\.deleting' || true)
echo "temporaries left by the last kill: $leftover (removed at the next start)"
run_layout killed 1 "${model[@]}" "${ck[@]}"  # to the end, saving only there
[[ -z $(ls -a "$dir" | grep '\.tmp$\|^\.deleting' || true) ]]
run_layout whole 1 "${model[@]}"
/usr/bin/python3 tests/cmd/compare_layouts.py --exact "$tmp" whole:killed

echo "== a rank of 2 killed during saves"
dir2=$tmp/ranks/ckpt
args2=("${model[@]}" --set schedule.train_iters=200 --set parallel.zero_stage=1
  --set checkpoint.dir="$dir2" --set checkpoint.resume=true --set checkpoint.keep_last=2)
landed=0 attempts=0 last=0
while ((landed < 6)); do
  ((++attempts <= 30)) || { echo "FAIL: only $landed kills landed in $attempts attempts"; exit 1; }
  run_layout ranks 2 "${args2[@]}" --set checkpoint.save_interval=1 >/dev/null 2>&1 &
  launcher=$!
  # Armed by progress, not by the clock: once this attempt has committed a checkpoint of its own
  # (it is in its saving loop), a random moment later. A fixed delay let a fast machine train all
  # 200 iterations before the sixth kill.
  for _ in $(seq 600); do
    (($(cat "$dir2/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0) > last)) && break
    sleep 0.05
  done
  sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
  victims=()
  for p in $(pgrep -f -- "logging.metrics_file=$tmp/ranks/metrics.jsonl" || true); do
    [[ $(ps -o comm= -p "$p" 2>/dev/null) == mtnlg-train ]] && victims+=("$p")
  done
  ((${#victims[@]} > 0)) && kill -9 "${victims[RANDOM % ${#victims[@]}]}" 2>/dev/null
  wait "$launcher" 2>/dev/null || true
  for _ in $(seq 100); do # mpirun takes the other rank down
    pgrep -f -- "logging.metrics_file=$tmp/ranks/metrics.jsonl" >/dev/null || break
    sleep 0.1
  done
  for d in "$dir2"/iter_*; do
    [[ $d != *.tmp && -e $d/manifest.json ]] || continue
    "$ckpt" verify "$d" >/dev/null || { echo "FAIL: $d does not verify after kill $attempts"; exit 1; }
  done
  now=$(cat "$dir2/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)
  ((now > last)) && landed=$((landed + 1))
  last=$now
  ((now < 200)) || { echo "FAIL: the 2-rank run finished before it was killed"; exit 1; }
done
echo "ok: $landed of $attempts rank kills landed in a saving run; latest: iteration $last"
run_layout ranks 2 "${args2[@]}"
run_layout whole2 2 "${model[@]}" --set schedule.train_iters=200 --set parallel.zero_stage=1
/usr/bin/python3 tests/cmd/compare_layouts.py --exact "$tmp" whole2:ranks
echo "ckpt_kill_test: ok"
