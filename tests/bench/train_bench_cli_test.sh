#!/usr/bin/env bash
# mtnlg-bench-train's command line on the CPU: --dropout is checked (exit 2 naming it), reaches
# the model (a different loss from the same seed, its value in the header and the JSON line),
# and --profile then shows the dropout calls; bad layouts and usage errors are exit 2.
# Usage: tests/bench/train_bench_cli_test.sh BUILD_DIR
set -uo pipefail
bin=$1/bench/mtnlg-bench-train
source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh" # expect, check, passes, failures

base=(--layers 1 --hidden 32 --seq 16 --vocab 64 --micro-batch 2 --iters 1 --warmup-iters 0
  --threads 1)
small=("${base[@]}" --heads 2 --global-batch 2)
expect 2 "--dropout 1.0.* is not in \[0, 1\)" -- "${small[@]}" --dropout 1
expect 2 "--dropout -0.1.* is not in \[0, 1\)" -- "${small[@]}" --dropout -0.1
expect 2 "--hidden 32 is not divisible by --heads 3" -- "${base[@]}" --heads 3
expect 2 "--global-batch 3 is not a multiple of --micro-batch 2" -- "${base[@]}" --heads 2 \
  --global-batch 3
# A usage error CLI11 catches is exit 2 too (cmd/cli_parse.h), as the executables' own.
expect 2 "--heads: At Most 1 required but received 2" -- "${small[@]}" --heads 4
expect 2 "--bogus" -- "${small[@]}" --bogus
expect 0 "dropout 0\.25\)" -- "${small[@]}" --dropout 0.25
expect 0 "dropout_add .*dropout_backward|dropout_backward .*dropout_add" -- \
  "${small[@]}" --dropout 0.25 --profile

# The calls an iteration (the launch count a CUDA graph would replace): the header's figure is
# the rows' calls summed, and the phases'.
calls_agree() {
  "$bin" "${small[@]}" --dropout 0.25 --profile 2>&1 | python3 -c '
import re, sys
text = sys.stdin.read()
head = int(re.search(r"; (\d+) calls an iteration;", text).group(1))
rows = sum(int(m.group(1)) for m in re.finditer(r"^\S+/\S.*?\s(\d+)\s+[\d.]+\s+[\d.]+", text, re.M))
phases = sum(int(n) for n in re.findall(r"%, (\d+) calls\)", text))
print(f"calls an iteration: header {head}, rows {rows}, phases {phases}", file=sys.stderr)
sys.exit(0 if head > 0 and head == rows == phases else 1)'
}
check "--profile counts the calls an iteration (header = rows = phases)" calls_agree

# The host's waits for the device an iteration (Backend::host_waits): none on the CPU; not
# reported under --profile, whose timer waits after every call.
waits() { "$bin" "${small[@]}" --json "$@" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["host_waits_per_iter"])'; }
check "the JSON line carries the host waits an iteration: 0 on the CPU" [ "$(waits)" = 0 ]
check "--profile's JSON line has no waits figure (null)" [ "$(waits --profile)" = None ]
expect 0 "host waits for the device an iteration: 0 " -- "${small[@]}"

# --graph (Backend::capture): the CPU replays the recorded calls, so the loss is the plain run's
# bit for bit (two micro-batches an iteration: each uploaded, then replayed); what a replay
# could not repeat is refused, naming the flag.
warm=(--layers 1 --hidden 32 --seq 16 --vocab 64 --micro-batch 2 --heads 2 --global-batch 4
  --iters 2 --warmup-iters 1 --threads 1)
graph_loss() { "$bin" "${warm[@]}" --json "$@" 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(repr(d["loss"]), d["graph"])'; }
# The launches a micro-batch makes (a CUDA graph's nodes): none on the CPU.
launches() { "$bin" "${warm[@]}" --json "$@" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["launches_per_micro_batch"])'; }
check "the JSON line's launches a micro-batch: null on the CPU" [ "$(launches)" = None ]
check "the JSON line's launches a micro-batch with --graph: null on the CPU" [ "$(launches --graph)" = None ]
plain_loss=$(graph_loss)
replayed_loss=$(graph_loss --graph)
check "--graph gives the plain run's loss ($plain_loss / $replayed_loss)" \
  [ "${plain_loss% *} ${replayed_loss}" = "${replayed_loss% *} ${replayed_loss% *} True" ]
# With dropout: recorded as micro-batch 0, each replay draws its micro-batch's masks through
# Backend::set_rng_stream_base (the same masks as the plain run, which a replay of micro-batch
# 0's masks would not give).
plain_dropped=$(graph_loss --dropout 0.25)
replayed_dropped=$(graph_loss --dropout 0.25 --graph)
check "--graph with dropout gives the plain run's loss ($plain_dropped / $replayed_dropped)" \
  [ "${plain_dropped% *} ${replayed_dropped}" = "${replayed_dropped% *} ${replayed_dropped% *} True" ]
check "dropout reaches the replayed step ($replayed_loss / $replayed_dropped)" \
  [ "${replayed_loss% *}" != "${replayed_dropped% *}" ]
expect 2 "--graph needs --precision fp32 or bf16" -- "${small[@]}" --graph --precision fp8
expect 2 "--graph and --profile" -- "${small[@]}" --graph --profile
expect 2 "--graph needs --warmup-iters >= 1" -- "${small[@]}" --graph
expect 0 "--graph: each micro-batch's forward and backward, and the optimizer step, replayed" -- "${warm[@]}" --graph

loss() { "$bin" "${small[@]}" --json "$@" 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["loss"], d["dropout"])'; }
plain=$(loss)
dropped=$(loss --dropout 0.25)
again=$(loss --dropout 0.25)
check "the JSON line carries the dropout ($plain / $dropped)" \
  [ "${plain#* } ${dropped#* }" = "0 0.25" ]
check "dropout changes the loss ($plain vs $dropped)" [ "${plain% *}" != "${dropped% *}" ]
check "the same seed gives the same loss with dropout ($dropped vs $again)" [ "$dropped" = "$again" ]

echo "train_bench_cli: $passes passed, $failures failed"
[[ $failures -eq 0 ]]
