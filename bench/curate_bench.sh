#!/usr/bin/env bash
# The corpus stages' speed and accuracy, side by side in one run on this machine:
#   1. dedup minhash, one thread: MB/s of text for --hash datasketch and xxh3, and the NumPy
#      implementation of datasketch (tests/reference/curate_reference.py: hashlib's SHA-1 and
#      numpy's update_batch, as datasketch computes) on the same shard;
#   2. accuracy: the Jaccard estimates of both families against the exact Jaccard of pairs
#      with known overlap (mean error and RMSE; 128 functions);
#   3. fuzzy dedup of a generated corpus of --mb megabytes (planted duplicates) on every core:
#      wall time, peak memory (/usr/bin/time), groups found;
#   4. decontaminate, one thread, against filter_ngrams.py's algorithm in Python
#      (tests/reference/curate_reference.py decontaminate: the script's loops, dicts and re) on a
#      --decon-mb shard with planted task passages; the outputs must be the same records.
#   5. the other stages, one thread: extract (a WARC of Debian's HTML documentation, repeated),
#      clean (--gopher and CLD2 languages), quality score: MB/s of their input.
# Usage: bench/curate_bench.sh BUILD_DIR [--mb MB] [--minhash-mb MB] [--decon-mb MB]
#   (defaults 1000, 20 and 10)
# Prints a table; the figures of record are in docs/curation.md with their dates.
set -euo pipefail
build=${1:?usage: bench/curate_bench.sh BUILD_DIR [--mb MB] [--minhash-mb MB]}
shift
mb=1000
minhash_mb=20
decon_mb=10
while (($#)); do
  case "$1" in
    --decon-mb) decon_mb=$2; shift ;;
    --mb) mb=$2; shift ;;
    --minhash-mb) minhash_mb=$2; shift ;;
    *) echo "curate_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
curate=$(cd "$build" && pwd)/mtnlg-curate
py=/usr/bin/python3
ref=$src/tests/reference/curate_reference.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
echo "curate_bench: $(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

# 1. minhash speed, one thread.
$py "$src/tests/curate/make_dedup_corpus.py" small --mb "$minhash_mb" --seed 3 >/dev/null
shard=small/cc/cc-00.jsonl
text_mb=$($py -c "
import json,sys; print(sum(len(json.loads(l)['text'].encode()) for l in open(sys.argv[1]))/1e6)" "$shard")
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
t_ds=$(secs "$curate" dedup minhash --input "$shard" --output ds.npy --hash datasketch --threads 1)
t_x=$(secs "$curate" dedup minhash --input "$shard" --output x.npy --hash xxh3 --threads 1)
t_np=$(secs $py "$ref" minhash "$shard" np.npy 128 1)
cmp -s <($py -c "import numpy as n; print(n.load('ds.npy').tobytes().hex())") \
  <($py -c "import numpy as n; print(n.load('np.npy').tobytes().hex())") ||
  { echo "curate_bench: datasketch signatures differ from the NumPy reference" >&2; exit 1; }
printf '\n%-44s %10s %12s\n' "dedup minhash, 1 thread, $text_mb MB of text" "seconds" "MB/s/core"
for row in "NumPy datasketch (reference):$t_np" "mtnlg-curate --hash datasketch:$t_ds" \
  "mtnlg-curate --hash xxh3 (default):$t_x"; do
  printf '%-44s %10.2f %12.2f\n' "${row%%:*}" "${row##*:}" "$(echo "$text_mb / ${row##*:}" | bc -l)"
done
printf '%-44s %10.1fx\n' "datasketch: ours over NumPy" "$(echo "$t_np / $t_ds" | bc -l)"

# 2. Jaccard estimates against exact values, both families.
$py - <<'PY' >pairs.jsonl
import json, random
rng = random.Random(11)
vocab = ["w%d" % i for i in range(3000)]
for _ in range(400):
    a = [rng.choice(vocab) for _ in range(rng.randint(50, 300))]
    b = list(a)
    for i in rng.sample(range(len(b)), int(len(b) * rng.uniform(0.0, 0.5))):
        b[i] = rng.choice(vocab)
    print(json.dumps({"text": " ".join(a)}))
    print(json.dumps({"text": " ".join(b)}))
PY
for h in datasketch xxh3; do
  "$curate" dedup minhash --input pairs.jsonl --output "pairs-$h.npy" --hash $h --log-level warn
done
$py - "$ref" <<'PY'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0])
import curate_reference as c
texts = [json.loads(l)["text"] for l in open("pairs.jsonl")]
exact = []
for i in range(0, len(texts), 2):
    a, b = c.shingles(texts[i]), c.shingles(texts[i + 1])
    exact.append(len(a & b) / len(a | b))
exact = np.array(exact)
print("\n%-44s %10s %12s" % ("Jaccard estimates, %d pairs, 128 functions" % len(exact), "mean err", "RMSE"))
for h in ("datasketch", "xxh3"):
    s = np.load("pairs-%s.npy" % h)
    est = (s[0::2] == s[1::2]).mean(axis=1)
    print("%-44s %10.4f %12.4f" % (h, (est - exact).mean(), np.sqrt(((est - exact) ** 2).mean())))
PY

# 3. Fuzzy dedup of an MB-megabyte corpus on every core.
$py "$src/tests/curate/make_dedup_corpus.py" big --mb "$mb" --seed 5 >gen.txt
/usr/bin/time -v "$curate" dedup --input wiki=big/wiki/wiki.jsonl --input books=big/books/books.jsonl.gz \
  --input cc=big/cc/cc-00.jsonl --input cc=big/cc/cc-01.jsonl.zst --priority wiki,books,cc \
  --output-dir out --report out/groups.jsonl --no-progress-bar >dedup.log 2>time.txt
wall=$(grep "Elapsed (wall clock)" time.txt | awk '{print $NF}')
rss=$(grep "Maximum resident set size" time.txt | awk '{print $NF}')
printf '\n%-44s\n' "fuzzy dedup, $(cat gen.txt), $(nproc) threads"
printf '  wall %s, peak memory %.0f MB\n' "$wall" "$(echo "$rss / 1024" | bc -l)"
grep -o 'dedup: [0-9]* documents.*' dedup.log | head -1 | sed 's/^/  /'

# 4. decontamination, one thread, against the script's algorithm in Python.
$py "$src/tests/curate/make_decon_corpus.py" dc --mb "$decon_mb" --seed 9 >dcgen.txt
t_ours=$(secs "$curate" decontaminate --input dc/train.jsonl --output ours.jsonl --threads 1 \
  --task-file lambada=dc/lambada.jsonl --task-file piqa=dc/piqa.jsonl)
t_py=$(secs $py "$ref" decontaminate dc/train.jsonl ref.jsonl lambada=dc/lambada.jsonl piqa=dc/piqa.jsonl)
$py -c "
import json, sys
a = [json.loads(l) for l in open('ours.jsonl')]; b = [json.loads(l) for l in open('ref.jsonl')]
sys.exit(0 if a == b else 1)" || { echo "curate_bench: decontaminate differs from the reference" >&2; exit 1; }
printf '\n%-44s %10s %12s\n' "decontaminate, 1 thread, $(cat dcgen.txt)" "seconds" "MB/s/core"
mbt=$(awk '{print $3}' dcgen.txt)
printf '%-44s %10.2f %12.2f\n' "filter_ngrams.py's algorithm (Python)" "$t_py" "$(echo "$mbt / $t_py" | bc -l)"
printf '%-44s %10.2f %12.2f\n' "mtnlg-curate decontaminate" "$t_ours" "$(echo "$mbt / $t_ours" | bc -l)"
printf '%-44s %10.1fx\n' "ours over Python" "$(echo "$t_py / $t_ours" | bc -l)"

# 5. The other stages, one thread, MB/s of their input.
$py - <<'PY'
import glob, gzip
pages = [open(p, "rb").read() for p in sorted(glob.glob("/usr/share/doc/libffi8/html/*.html"))]
with open("web.warc.gz", "wb") as f:
    for i in range(60):
        for j, html in enumerate(pages):
            body = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + html
            f.write(gzip.compress(b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: https://x/%d/%d\r\n"
                                  b"Content-Length: %d\r\n\r\n" % (i, j, len(body)) + body + b"\r\n\r\n"))
PY
warc_mb=$($py -c "import gzip; print(len(gzip.open('web.warc.gz').read()) / 1e6)")
t_ex=$(secs "$curate" extract --input web.warc.gz --output web.jsonl --threads 1)
t_cl=$(secs "$curate" clean --input "$shard" --output clean.jsonl --gopher --languages en --threads 1)
"$curate" quality train --positive small/wiki/wiki.jsonl --negative "$shard" --output q.bin --dim 16 \
  --bucket 200000 --log-level warn
t_q=$(secs "$curate" quality score --model q.bin --input "$shard" --output scored.jsonl --threads 1)
printf '\n%-44s %10s %12s\n' "other stages, 1 thread" "seconds" "MB/s/core"
printf '%-44s %10.2f %12.2f\n' "extract ($warc_mb MB of WARC)" "$t_ex" "$(echo "$warc_mb / $t_ex" | bc -l)"
printf '%-44s %10.2f %12.2f\n' "clean --gopher --languages en ($text_mb MB)" "$t_cl" "$(echo "$text_mb / $t_cl" | bc -l)"
printf '%-44s %10.2f %12.2f\n' "quality score ($text_mb MB)" "$t_q" "$(echo "$text_mb / $t_q" | bc -l)"
