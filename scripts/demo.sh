#!/usr/bin/env bash
# The first thing to run: builds mtnlg-train, prepares the KJV demo corpus and trains the small
# CPU demo model (configs/demo-cpu.yaml).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  cat <<'USAGE'
Usage: scripts/demo.sh [--build-dir DIR] [--no-cuda] [MTNLG_TRAIN_ARGS...]

Runs scripts/setup.sh, builds mtnlg-train (scripts/build.sh), tokenizes the King James Bible
and the fortunes collection into data/demo/{kjv,fortunes}_text_document.{bin,idx}
(scripts/demo_corpus_jsonl.py, then mtnlg-preprocess), then runs
  DIR/mtnlg-train --config configs/demo-cpu.yaml MTNLG_TRAIN_ARGS...
Other arguments go to mtnlg-train unchanged, e.g.
  scripts/demo.sh --set schedule.train_iters=50

  --build-dir DIR  build directory (default: build)
  --no-cuda        do not build the CUDA backend
  -h, --help       this text (mtnlg-train's own: DIR/mtnlg-train --help)

Environment: MTNLG_JOBS (build jobs, default 2)
USAGE
}

build_dir=build
build_opts=()
train_args=()
while (($#)); do
  case "$1" in
    --build-dir)
      [[ $# -ge 2 ]] || { echo "demo.sh: --build-dir needs a directory" >&2; exit 2; }
      build_dir=$2
      shift
      ;;
    --no-cuda) build_opts+=("$1") ;;
    -h | --help) usage; exit 0 ;;
    *) train_args+=("$1") ;;
  esac
  shift
done

scripts/build.sh --build-dir "$build_dir" --target mtnlg-train --target mtnlg-preprocess \
  "${build_opts[@]}"

# The demo corpus: two real English datasets, blended by the recipe. Tokenized once; later runs
# reuse the files.
mkdir -p data/demo
for name in kjv fortunes; do
  prefix=data/demo/${name}_text_document
  if [[ -s $prefix.bin && -s $prefix.idx ]]; then
    echo "demo.sh: $prefix.{bin,idx} already prepared"
    continue
  fi
  if [[ ! -s data/demo/raw/$name.jsonl ]]; then
    /usr/bin/python3 scripts/demo_corpus_jsonl.py data/demo/raw
  fi
  "$build_dir/mtnlg-preprocess" --input "data/demo/raw/$name.jsonl" --output-prefix "$prefix" \
    --append-eod --workers 2 --no-progress-bar
done

echo "demo.sh: $build_dir/mtnlg-train --config configs/demo-cpu.yaml ${train_args[*]}"
exec "$build_dir/mtnlg-train" --config configs/demo-cpu.yaml "${train_args[@]}"
