#!/usr/bin/env bash
# mtnlg-preprocess throughput: MB/s of JSON-lines input, with 1 and 2 worker threads, on a
# generated corpus of English (the King James Bible, one document per chapter, repeated).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  cat <<'USAGE'
Usage: bench/preprocess_bench.sh [--mb N] [--workers LIST] [--build-dir DIR] [--help]

Writes a JSON-lines corpus of about N MB (default 20) from `bible -f Gen1:1-Rev22:21` (Debian
package bible-kjv), one {"text": chapter} per line, repeated, into a temporary directory;
runs DIR/mtnlg-preprocess --append-eod on it once per worker count (default 1,2), and prints
  workers | seconds | MB/s | MB/s per worker | documents | tokens
The binary must be built (cmake --build DIR --target mtnlg-preprocess). Timings depend on the
machine's other load; nothing asserts on them.
USAGE
}

mb=20
workers_list=1,2
build=build
while [[ $# -gt 0 ]]; do
  case $1 in
    --mb) mb=$2; shift 2 ;;
    --workers) workers_list=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "preprocess_bench.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
bin=$build/mtnlg-preprocess
[[ -x $bin ]] || { echo "preprocess_bench.sh: $bin not found; build it first" >&2; exit 4; }
command -v bible >/dev/null || { echo "preprocess_bench.sh: needs bible (apt-get install bible-kjv)" >&2; exit 4; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bible -f Gen1:1-Rev22:21 | /usr/bin/python3 -c '
import json, re, sys
target = int(sys.argv[1]) * 1000 * 1000
verse = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")
chapters, current, key = [], [], None
for line in sys.stdin:
    m = verse.match(line.rstrip("\n"))
    if not m:
        continue
    if (m.group(1), m.group(2)) != key and current:
        chapters.append("\n".join(current) + "\n")
        current = []
    key = (m.group(1), m.group(2))
    current.append(m.group(4).rstrip())
chapters.append("\n".join(current) + "\n")
lines = [json.dumps({"text": c}) + "\n" for c in chapters]
written = 0
with open(sys.argv[2], "w") as f:
    while written < target:
        for line in lines:
            f.write(line)
            written += len(line)
            if written >= target:
                break
' "$mb" "$tmp/corpus.jsonl"
size=$(stat -c %s "$tmp/corpus.jsonl")

printf '%-8s %8s %8s %16s %10s %12s\n' workers seconds MB/s "MB/s per worker" documents tokens
IFS=, read -ra counts <<<"$workers_list"
for w in "${counts[@]}"; do
  start=$(date +%s.%N)
  "$bin" --input "$tmp/corpus.jsonl" --output-prefix "$tmp/out" --append-eod --workers "$w" \
    --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --no-progress-bar \
    --log-level warn
  end=$(date +%s.%N)
  read -r docs tokens < <(/usr/bin/python3 -c '
import struct, sys
with open(sys.argv[1], "rb") as f:
    h = f.read(34)
    n = struct.unpack("<Q", h[18:26])[0]
    lengths = struct.unpack("<%di" % n, f.read(4 * n))
print(n, sum(lengths))' "$tmp/out.idx")
  awk -v w="$w" -v s="$size" -v t0="$start" -v t1="$end" -v d="$docs" -v k="$tokens" 'BEGIN {
    t = t1 - t0; r = s / 1e6 / t;
    printf "%-8d %8.2f %8.2f %16.2f %10d %12d\n", w, t, r, r / w, d, k }'
done
