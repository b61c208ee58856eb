#!/usr/bin/env bash
# The first thing to run: builds mtnlg-train, prepares the KJV demo corpus and trains the small
# CPU demo model (configs/demo-cpu.yaml).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  cat <<'USAGE'
Usage: scripts/demo.sh [--build-dir DIR] [--no-cuda] [MTNLG_TRAIN_ARGS...]

Runs scripts/setup.sh, builds mtnlg-train (scripts/build.sh), tokenizes the King James Bible
into data/demo/kjv_text_document.{bin,idx} (scripts/prepare_demo_data.py), then runs
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

scripts/build.sh --build-dir "$build_dir" --target mtnlg-train "${build_opts[@]}"

echo "demo.sh: preparing data/demo/kjv_text_document"
/usr/bin/python3 scripts/prepare_demo_data.py --output-prefix data/demo/kjv_text_document

echo "demo.sh: $build_dir/mtnlg-train --config configs/demo-cpu.yaml ${train_args[*]}"
exec "$build_dir/mtnlg-train" --config configs/demo-cpu.yaml "${train_args[@]}"
