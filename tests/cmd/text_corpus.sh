# Sourced by command-line tests that need real text: make_text_corpus BUILD_DIR PREFIX writes
# 60 documents of plain English (PREFIX.jsonl) and tokenizes them with mtnlg-preprocess
# (--append-eod) into PREFIX.bin / PREFIX.idx; returns non-zero if that fails.
make_text_corpus() {
  local build=$1 prefix=$2
  /usr/bin/python3 - "$prefix.jsonl" <<'PY' || return 1
import json, sys
words = "in the beginning God created the heaven and the earth and the earth was without form".split()
with open(sys.argv[1], "w") as f:
    for d in range(60):
        text = " ".join(words[(d + i) % len(words)] for i in range(40 + d % 17)) + ".\n"
        f.write(json.dumps({"text": text}) + "\n")
PY
  "$build/mtnlg-preprocess" --input "$prefix.jsonl" --output-prefix "$prefix" --append-eod \
    --log-level warn >/dev/null
}

# train_text_checkpoint BUILD_DIR DIR ITERS [ARGS...]: make_text_corpus into DIR/c, then the tiny
# recipe with GPT-2's vocabulary trains ITERS iterations on it and saves DIR/ckpt at the last
# (metrics in DIR/metrics.jsonl, no evaluation); ARGS follow on mtnlg-train's command line (a
# later --set of a key wins). Run from the source tree; says which step failed and returns 1.
train_text_checkpoint() {
  local build=$1 dir=$2 iters=$3
  shift 3
  make_text_corpus "$build" "$dir/c" || { echo "FAIL: mtnlg-preprocess"; return 1; }
  "$build/mtnlg-train" -c configs/tiny.yaml --set model.vocab_size=50257 \
    --set "data.blend=[{prefix: $dir/c, weight: 1}]" --set "data.split=[8,1,1]" \
    --set "data.cache_dir=$dir/cache" --set schedule.train_iters="$iters" --set eval.interval=0 \
    --set checkpoint.dir="$dir/ckpt" --set checkpoint.save_interval="$iters" \
    --set logging.metrics_file="$dir/metrics.jsonl" --log-level warn --threads 2 "$@" \
    || { echo "FAIL: training the checkpoint"; return 1; }
}
