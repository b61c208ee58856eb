#!/usr/bin/env bash
# Checks of scripts/plot_metrics.py on metrics written by two tiny mtnlg-train runs: PNGs per run
# and overlaid, where they go, and the errors for a missing, empty or non-JSON metrics file.
# Usage: tests/scripts/plot_metrics_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
plot=$src/scripts/plot_metrics.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PYTHONDONTWRITEBYTECODE=1 # imports from scripts/ leave no __pycache__ in the source tree
source "$src/tests/cli_expect.sh" # check DESCRIPTION COMMAND...; counts $passes and $failures
# shellcheck disable=SC2317 # called through check
contains() { grep -Eq -- "$2" "$1"; } # contains FILE ERE
# shellcheck disable=SC2317
is_png() { # is_png FILE: the PNG signature, a 1200 x 800 image, more than 10 kB
  /usr/bin/python3 - "$1" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
ok = data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and \
    struct.unpack(">II", data[16:24]) == (1200, 800) and len(data) > 10000
sys.exit(0 if ok else 1)
PY
}
# expect_error STATUS PATTERN ARGS...: plot_metrics.py exits STATUS, stderr matches PATTERN
expect_error() {
  local want=$1 pattern=$2 status=0
  shift 2
  /usr/bin/python3 "$plot" "$@" >"$tmp/err" 2>&1 || status=$?
  check "plot_metrics.py $* -> exit $want (got $status)" test "$status" -eq "$want"
  check "plot_metrics.py $* -> /$pattern/" contains "$tmp/err" "$pattern"
}

cd "$tmp" || exit 1
/usr/bin/python3 - "$src/scripts" "$tmp/corpus" <<'PY' || exit 1
import random, sys
sys.path.insert(0, sys.argv[1])
from prepare_demo_data import write_indexed_dataset
rng = random.Random(7)
write_indexed_dataset(sys.argv[2], [[rng.randrange(512) for _ in range(20 + rng.randrange(60))]
                                    for _ in range(200)])
PY
# Two runs with validation and a batch ramp, so every panel has something to draw.
for lr in 1e-3 3e-3; do
  "$build/mtnlg-train" --config "$src/configs/tiny.yaml" --threads 1 --log-level warn \
    --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set "data.split=[9,1,0]" \
    --set data.cache_dir="$tmp/cache" --set schedule.train_iters=12 --set eval.interval=4 \
    --set eval.iters=1 --set batch.global_batch_size=8 \
    --set "batch.rampup={start: 4, increment: 2, tokens: 768}" --set optimizer.lr=$lr \
    --set logging.metrics_file="$tmp/runs/lr=$lr/metrics.jsonl" || exit 1
done
a=$tmp/runs/lr=1e-3
b=$tmp/runs/lr=3e-3

# One run: metrics.png beside the metrics file by default.
/usr/bin/python3 "$plot" "$a/metrics.jsonl" >"$tmp/out" 2>&1
check "one run: exit 0" test $? -eq 0
check "one run: metrics.png" is_png "$a/metrics.png"
check "one run: names the file" contains "$tmp/out" "wrote $a/metrics\.png"
# Run directories into a directory: one PNG per run, named by label.
/usr/bin/python3 "$plot" "$a" "$b" --out "$tmp/plots/" >/dev/null 2>&1
check "--out DIR/: exit 0" test $? -eq 0
check "--out DIR/: first" is_png "$tmp/plots/lr=1e-3.png"
check "--out DIR/: second" is_png "$tmp/plots/lr=3e-3.png"
/usr/bin/python3 "$plot" "$a" "$b" --labels x,y --out "$tmp/pattern/{index}-{label}.png" >/dev/null 2>&1
check "--out pattern with --labels" is_png "$tmp/pattern/1-y.png"
/usr/bin/python3 "$plot" "$a/metrics.jsonl" --out "$tmp/single.png" >/dev/null 2>&1
check "--out FILE" is_png "$tmp/single.png"
# Overlay: one PNG, by default in the runs' common directory.
/usr/bin/python3 "$plot" "$a/metrics.jsonl" "$b/metrics.jsonl" --overlay >/dev/null 2>&1
check "--overlay: exit 0" test $? -eq 0
check "--overlay: runs/overlay.png" is_png "$tmp/runs/overlay.png"
/usr/bin/python3 "$plot" "$a" "$b" --overlay --labels 'lr 1e-3,lr 3e-3' --title sweep \
  --out "$tmp/sweep.png" >/dev/null 2>&1
check "--overlay --out FILE" is_png "$tmp/sweep.png"
check "8 PNGs in all, no others" test "$(find "$tmp" -name '*.png' | wc -l)" -eq 8
# The panels: all five for a run whose batch ramps; without the ramp the constant global batch
# is left out (and the grad norm panel is always there).
check "ramp run: five panels" contains "$tmp/out" \
  "\(loss, gradient norm, learning rate, global batch size, throughput\)"
"$build/mtnlg-train" --config "$src/configs/tiny.yaml" --threads 1 --log-level warn \
  --set "data.blend=[{prefix: $tmp/corpus, weight: 1}]" --set "data.split=[9,1,0]" \
  --set data.cache_dir="$tmp/cache" --set schedule.train_iters=6 --set eval.interval=0 \
  --set logging.metrics_file="$tmp/flat/metrics.jsonl" || exit 1
/usr/bin/python3 "$plot" "$tmp/flat" --smooth 0 >"$tmp/out" 2>&1
check "constant batch: no batch panel" contains "$tmp/out" \
  "\(loss, gradient norm, learning rate, throughput\)$"
check "four panels: a 1200 x 800 PNG" is_png "$tmp/flat/metrics.png"
rm -f "$tmp/flat/metrics.png"
expect_error 2 "--smooth 1: give a weight in \[0, 1\)" "$tmp/flat" --smooth 1
# The smoothing is TensorBoard's debiased moving average.
check "smooth(): debiased EMA" /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$src/scripts')
from plot_metrics import smooth
s = smooth([1.0, 3.0, 3.0], 0.5)
assert s[0] == 1.0 and abs(s[1] - (0.25 + 1.5) / 0.75) < 1e-12, s
assert smooth([1.0, 2.0], 0) == [1.0, 2.0]"

# Errors name the file (and line); nothing is written.
expect_error 1 "$tmp/none\.jsonl: no such file" "$tmp/none.jsonl"
: >"$tmp/empty.jsonl"
expect_error 1 "$tmp/empty\.jsonl: empty" "$tmp/empty.jsonl"
{ head -n 2 "$a/metrics.jsonl"; echo '{"iteration": 3, "loss": 6.'; } >"$tmp/bad.jsonl"
expect_error 1 "$tmp/bad\.jsonl:3: not a JSON line" "$tmp/bad.jsonl"
check "bad file: no PNG" test ! -e "$tmp/bad.png"
echo '[1, 2]' >"$tmp/array.jsonl"
expect_error 1 "$tmp/array\.jsonl:1: a JSON line that is not an object" "$tmp/array.jsonl"
echo '{"iteration": 1, "loss": 2}' >"$tmp/foreign.jsonl"
expect_error 1 "$tmp/foreign\.jsonl:1: no numeric \"consumed_tokens\"" "$tmp/foreign.jsonl"
expect_error 1 "no such file" "$a/metrics.jsonl" "$tmp/none.jsonl" --overlay
expect_error 2 "--labels has 1 labels for 2" "$a" "$b" --labels x
expect_error 2 "2 runs need a directory" "$a" "$b" --out "$tmp/both.png"

echo "plot_metrics: $passes passed, $failures failed"
exit $((failures > 0))
