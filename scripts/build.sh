#!/usr/bin/env bash
# Configures and builds mtnlg-train with CMake (installing missing packages first).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  cat <<'USAGE'
Usage: scripts/build.sh [--no-cuda] [--debug] [--build-dir DIR] [--target T]... [--help]

Runs scripts/setup.sh, configures DIR (default: build) with CMake and builds it.
The CUDA backend is compiled when /usr/local/cuda/bin/nvcc exists or nvcc is on PATH
(a GPU is not needed to compile it).

  --no-cuda        do not build the CUDA backend even when nvcc is found
  --debug          CMAKE_BUILD_TYPE=Debug (default: Release)
  --build-dir DIR  build directory (default: build)
  --target T       build only target T (repeatable; default: everything)
  -h, --help       this text

Environment: MTNLG_JOBS  parallel build jobs (default: 2)
USAGE
}

build_dir=build
build_type=Release
cuda=auto
targets=()
while (($#)); do
  case "$1" in
    --no-cuda) cuda=off ;;
    --debug) build_type=Debug ;;
    --build-dir)
      [[ $# -ge 2 ]] || { echo "build.sh: --build-dir needs a directory" >&2; exit 2; }
      build_dir=$2
      shift
      ;;
    --target)
      [[ $# -ge 2 ]] || { echo "build.sh: --target needs a target name" >&2; exit 2; }
      targets+=("$2")
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
jobs=${MTNLG_JOBS:-2}

scripts/setup.sh

cmake_args=(-S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type")
nvcc=""
if [[ $cuda == auto ]]; then
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then
    nvcc=/usr/local/cuda/bin/nvcc
  elif command -v nvcc >/dev/null; then
    nvcc=$(command -v nvcc)
  fi
fi
if [[ -n $nvcc ]]; then
  cmake_args+=(-DMTNLG_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc")
  echo "build.sh: configuring $build_dir ($build_type, CUDA backend with $nvcc)"
else
  cmake_args+=(-DMTNLG_CUDA=OFF)
  echo "build.sh: configuring $build_dir ($build_type, CPU only)"
fi
cmake "${cmake_args[@]}" >/dev/null

build_args=(--build "$build_dir" -j "$jobs")
if ((${#targets[@]})); then
  build_args+=(--target "${targets[@]}")
  echo "build.sh: building ${targets[*]} with -j$jobs"
else
  echo "build.sh: building everything with -j$jobs"
fi
cmake "${build_args[@]}"
echo "build.sh: done: $build_dir"
