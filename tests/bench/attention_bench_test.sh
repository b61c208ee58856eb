#!/usr/bin/env bash
# mtnlg-bench-attention and bench/torch_attention.py on the CPU: their usage errors are exit 2
# naming the flag; both count FlashAttention's FLOPs (forward 2 b h s^2 d causal, backward 2.5x:
# recomputed here from each line's own ms) on the same shapes; and `scripts/gpu/report.py
# attention` joins ours with PyTorch's on shape and dropout, PyTorch's time over ours.
# Usage: tests/bench/attention_bench_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
bin=$1/bench/mtnlg-bench-attention
src=$(cd "$2" && pwd)
source "$(dirname "${BASH_SOURCE[0]}")/../cli_expect.sh" # expect, check, passes, failures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PYTHONDONTWRITEBYTECODE=1

expect 2 "--kernels chooses the CUDA kernels" -- --kernels flash2
expect 2 "--kernels: .*bogus" -- --device cuda --kernels bogus
expect 2 "--shapes: '1x2x3' is neither" -- --shapes 1x2x3
expect 2 "--shapes: '2x0x1x8' is neither" -- --shapes 2x0x1x8
expect 2 "--dropout" -- --dropout 1
expect 2 "--dtype" -- --dtype f64
expect 0 "2x64x2x16 +cpu +cpu" -- --shapes 2x64x2x16 --dtype f32 --min-time 0

torch_py() { /usr/bin/python3 "$src/bench/torch_attention.py" "$@"; }
out=$(torch_py --shapes 1x2x3 2>&1)
rc=$?
check "torch_attention.py: a bad shape is exit 2 (got $rc)" [ "$rc" = 2 ]
check "torch_attention.py names the shape" grep -q "'1x2x3' is neither" <<<"$out"

for p in 0 0.25; do
  "$bin" --shapes demo,2x96x3x32 --dropout "$p" --min-time 0 --json >>"$tmp/a.jsonl" 2>/dev/null
  check "mtnlg-bench-attention --dropout $p exits 0" [ $? = 0 ]
  torch_py --shapes demo,2x96x3x32 --dropout "$p" --min-time 0 --json >>"$tmp/a.jsonl" 2>/dev/null
  check "torch_attention.py --dropout $p exits 0" [ $? = 0 ]
done
/usr/bin/python3 - "$tmp/a.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 8, f"8 lines (2 shapes x 2 dropouts x 2 impls), got {len(rows)}"
for r in rows:
    f = 2.0 * r["b"] * r["heads"] * r["s"] ** 2 * r["hd"]  # causal forward: half of 4 b h s^2 d
    for key, ms, flops in (("fwd", r["fwd_ms"], f), ("bwd", r["bwd_ms"], 2.5 * f)):
        want = flops / (ms * 1e-3) * 1e-12
        got = r[f"{key}_tflops"]
        assert abs(got - want) <= 1e-3 * want + 1e-4, (r["impl"], r["name"], key, got, want)
shapes = {(r["impl"], r["name"]): (r["b"], r["s"], r["heads"], r["hd"]) for r in rows}
assert shapes[("mtnlg", "demo")] == shapes[("torch", "demo")] == (4, 128, 4, 64), shapes
assert shapes[("mtnlg", "2x96x3x32")] == shapes[("torch", "2x96x3x32")] == (2, 96, 3, 32), shapes
PY
check "both count FlashAttention's FLOPs on the same shapes" [ $? = 0 ]

/usr/bin/python3 "$src/scripts/gpu/report.py" attention "$tmp/a.jsonl" "$tmp/a.json" >"$tmp/table"
check "report.py attention exits 0" [ $? = 0 ]
/usr/bin/python3 - "$tmp/a.jsonl" "$tmp/a.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rows = json.load(open(sys.argv[2]))["rows"]
ours = [r for r in rows if r["impl"] == "mtnlg"]
assert len(ours) == 4, ours
for r in ours:
    t = next(l for l in lines if l["impl"] == "torch" and l["name"] == r["name"]
             and l["dropout"] == r["dropout"])
    want = (t["fwd_ms"] + t["bwd_ms"]) / (r["fwd_ms"] + r["bwd_ms"])
    assert abs(r["torch_over_ours"] - want) < 1e-9 * want, (r, want)
    assert abs(r["torch_over_ours_fwd"] - t["fwd_ms"] / r["fwd_ms"]) < 1e-9 * r["torch_over_ours_fwd"]
assert all("torch_over_ours" not in r for r in rows if r["impl"] == "torch")
PY
check "report.py attention: torch's time over ours, matched on shape and dropout" [ $? = 0 ]
check "the table lists both impls of each shape" \
  bash -c "[ \$(grep -cE '^(demo|2x96x3x32) ' '$tmp/table') = 8 ]"

# The fastest passes: our families' forward and backward times on the 1.3B shape (made up), the
# settings that combine the fastest of each, and attention-choice's words for the kit's best row
# (none when that is plain blocked or plain flash2, which the kit's other rows ran).
line() { # KERNELS RUNS FWD_MS BWD_MS [DROPOUT]
  echo "{\"bench\":\"attention\",\"impl\":\"mtnlg\",\"kernels\":\"$1\",\"runs\":\"$2\"," \
    "\"dtype\":\"bf16\",\"dropout\":${5:-0.1},\"name\":\"1.3b\",\"b\":4,\"s\":2048," \
    "\"heads\":16,\"hd\":128,\"fwd_ms\":$3,\"bwd_ms\":$4,\"fwd_tflops\":1,\"bwd_tflops\":1}"
}
choice() { # JSONL -> attention-choice's words for 1.3b at 0.1
  /usr/bin/python3 "$src/scripts/gpu/report.py" attention "$1" "$tmp/c.json" >"$tmp/c.txt" &&
    /usr/bin/python3 "$src/scripts/gpu/report.py" attention-choice "$tmp/c.json" 1.3b 0.1
}
{
  line blocked blocked 2.0 5.0
  line flash2 flash2 1.5 6.0
  line flash2-128 flash2-128 1.2 6.1
  line flash2-recompute flash2-recompute 1.5 7.0
  line blocked blocked 9.0 1.0 0 # another dropout: not this choice's
} >"$tmp/c1.jsonl"
got=$(choice "$tmp/c1.jsonl")
check "flash2-128's forward, the blocked backward (got '$got')" \
  [ "$got" = "MTNLG_CUDA_ATTENTION=flash2-fwd MTNLG_CUDA_FLASH2_ROWS=128" ]
check "the table's line names both passes" grep -q \
  "fastest passes, 1.3b dropout 0.1: forward flash2-128 (1.200 ms), backward blocked (5.000 ms)" \
  "$tmp/c.txt"
{
  line blocked blocked 1.0 5.0
  line flash2 flash2 1.5 4.0
  line flash2-recompute flash2-recompute 1.5 3.0
} >"$tmp/c2.jsonl"
got=$(choice "$tmp/c2.jsonl")
check "the blocked forward, flash2's recomputing backward (got '$got')" \
  [ "$got" = "MTNLG_CUDA_ATTENTION=flash2-bwd MTNLG_CUDA_FLASH2_DQ=recompute" ]
{
  line blocked blocked 2.0 5.0
  line flash2 flash2 1.5 4.0
  line flash2-128 blocked 1.0 1.0 # did not run as asked: not a candidate
} >"$tmp/c3.jsonl"
got=$(choice "$tmp/c3.jsonl")
check "plain flash2, already a row of the kit's: no words (got '$got')" [ -z "$got" ]
/usr/bin/python3 "$src/scripts/gpu/report.py" attention-choice "$tmp/c.json" 1.3b 0.3 \
  >/dev/null 2>"$tmp/err"
rc=$?
check "attention-choice without the shape and dropout is exit 1 (got $rc)" [ "$rc" = 1 ]
check "it names the file" grep -q "c.json: no fastest passes for 1.3b at dropout 0.3" "$tmp/err"

echo "attention_bench: $passes passed, $failures failed"
[[ $failures -eq 0 ]]
