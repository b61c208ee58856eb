#!/usr/bin/env bash
# Checkpoint save and load throughput against the disk, side by side in one run.
#
# Usage: bench/checkpoint_bench.sh BUILD_DIR [--hidden H] [--layers L] [--dir DIR]
#
# Trains a GPT of L layers x hidden H (default 12 x 1024: 152M parameters, a 1.8 GB checkpoint
# of weights and Adam moments) for 2 iterations with a synchronous save after each, resumes from
# the result (load), then 8 iterations with an asynchronous save every 4, and measures the disk's
# own sequential write with fsync (dd of the checkpoint's bytes, before and after) and read, all
# on DIR (default: a temp dir in the build tree). Prints one table: GB/s of save and load against dd's, the stall of each save
# (synchronous: the whole save; asynchronous: the copy to host memory), and the ratios the
# checkpoint issue sets goals for (save and load >= 70% of dd; async stall <= 5% of the
# synchronous save). Nothing here asserts.
set -euo pipefail
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
[[ $# -ge 1 ]] || { usage >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
hidden=1024 layers=12 dir=""
while (($#)); do
  case "$1" in
    --hidden) hidden=$2; shift ;;
    --layers) layers=$2; shift ;;
    --dir) dir=$2; shift ;;
    *) echo "checkpoint_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=${dir:-$build/checkpoint-bench}
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 tests/cmd/make_tiny_corpus.py "$work/corpus" 400 512 >/dev/null

train() {  # NAME ITERS [args]: log to $work/NAME.log
  local name=$1 iters=$2
  shift 2
  "$build/mtnlg-train" --config configs/tiny.yaml --log-level info \
    --set model.num_layers="$layers" --set model.hidden_size="$hidden" \
    --set model.num_attention_heads=16 --set model.hidden_dropout=0 \
    --set model.attention_dropout=0 --set parallel.micro_batch_size=1 \
    --set batch.global_batch_size=1 --set schedule.train_iters="$iters" --set schedule.warmup_tokens=0 \
    --set "data.blend=[{prefix: $work/corpus, weight: 1}]" --set data.cache_dir="$work/cache" \
    --set logging.metrics_file="$work/$name/metrics.jsonl" "$@" >"$work/$name.log" 2>&1
}

# The disk's own rates: dd of as many random bytes (novel data, as every save's is: a virtual disk
# may write zeros or repeated blocks faster), before and after the saves (the disk is noisy).
dd_write() {
  head -c "$1" /dev/urandom >"$work/src.bin"
  dd if="$work/src.bin" of="$work/dd.bin" bs=8M conv=fsync 2>&1 | tail -1 >>"$work/dd_write.txt"
  rm -f "$work/dd.bin" "$work/src.bin"
}
# Cold reads where the page cache can be dropped (root), warm otherwise; dd the same way.
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null && echo cold || echo warm; }

train sync 2 --set checkpoint.dir="$work/ck-sync" --set checkpoint.save_interval=1
ck=$work/ck-sync/iter_0000002
bytes=$(du -sb "$ck" | cut -f1)
dd_write "$bytes"
cache=$(drop_caches)
train load 2 --set checkpoint.dir="$work/ck-sync" --set checkpoint.resume=true
drop_caches >/dev/null
for f in "$ck"/*.safetensors; do dd if="$f" of=/dev/null bs=8M 2>&1 | tail -1; done >"$work/dd_read.txt"
# Async: saves 4 iterations apart, so that a save is mostly done before the next one starts.
train async 8 --set checkpoint.dir="$work/ck-async" --set checkpoint.save_interval=4 \
  --set checkpoint.async=true
rm -rf "$work/ck-async"
dd_write "$bytes"
/usr/bin/python3 - "$work" "$bytes" "$cache" <<'PY'
import json, re, sys
work, nbytes, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def dd_rate(line):  # "N bytes (...) copied, 1.23 s, 456 MB/s"
    m = re.search(r"copied, ([0-9.]+) s", line)
    return int(re.match(r"(\d+) bytes", line).group(1)) / float(m.group(1)) / 1e9
def saves(name):
    out = []
    for line in open(f"{work}/{name}.log"):
        m = re.search(r"saved iteration (\d+) .* in ([0-9.]+) s", line)
        if m:
            out.append(float(m.group(2)))
    return out
def stalls(name):
    return [json.loads(l)["checkpoint_stall_ms"] for l in open(f"{work}/{name}/metrics.jsonl")
            if "checkpoint_stall_ms" in l]
load_s = float(re.search(r"resumed from .* in ([0-9.]+) s", open(f"{work}/load.log").read()).group(1))
writes = [dd_rate(l) for l in open(f"{work}/dd_write.txt")]
w = sum(writes) / len(writes)
reads = [l for l in open(f"{work}/dd_read.txt") if "copied" in l]
r = sum(int(re.match(r"(\d+) bytes", l).group(1)) for l in reads) / sum(
    float(re.search(r"copied, ([0-9.]+) s", l).group(1)) for l in reads) / 1e9
sync_s = min(saves("sync"))
sync_stall = min(stalls("sync")) / 1e3
async_stall = min(stalls("async")) / 1e3
gb = nbytes / 1e9
print(f"checkpoint: {gb:.2f} GB (weights + Adam moments, fp32); saves: best of 2; dd write: "
      f"mean of {', '.join(f'{x:.2f}' for x in writes)} GB/s (before and after); reads {cache}")
print(f"| what | seconds | GB/s | vs dd |")
print(f"|---|---|---|---|")
print(f"| dd write + fsync | {gb / w:.2f} | {w:.2f} | |")
print(f"| save (sync) | {sync_s:.2f} | {gb / sync_s:.2f} | {gb / sync_s / w:.0%} of dd write |")
print(f"| dd read ({cache}) | {gb / r:.2f} | {r:.2f} | |")
print(f"| load (resume, {cache}) | {load_s:.2f} | {gb / load_s:.2f} | {gb / load_s / r:.0%} of dd read |")
print(f"| stall, sync save | {sync_stall:.3f} | | |")
print(f"| stall, async save | {async_stall:.3f} | | {async_stall / sync_stall:.1%} of the sync stall |")
PY
