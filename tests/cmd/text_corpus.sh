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
