#!/usr/bin/env bash
# Builds mtnlg-train and runs every test with CTest; exits with CTest's status. CI runs this.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  cat <<'USAGE'
Usage: scripts/test.sh [--no-cuda] [--debug] [--build-dir DIR] [-j N] [-- CTEST_ARGS...]

Runs scripts/setup.sh and scripts/build.sh (same options, same build directory), then
  ctest --test-dir DIR --output-on-failure -j N CTEST_ARGS...
and exits with ctest's status. Example: scripts/test.sh -- -R tensor_test

  --no-cuda        do not build the CUDA backend
  --debug          Debug build
  --build-dir DIR  build directory (default: build)
  -j, --jobs N     tests run in parallel (default: $MTNLG_TEST_JOBS or 2)
  -h, --help       this text

Environment: MTNLG_JOBS (build jobs, default 2), MTNLG_TEST_JOBS (test jobs, default 2)
USAGE
}

build_dir=build
build_opts=()
test_jobs=${MTNLG_TEST_JOBS:-2}
ctest_args=()
while (($#)); do
  case "$1" in
    --no-cuda | --debug) build_opts+=("$1") ;;
    --build-dir)
      [[ $# -ge 2 ]] || { echo "test.sh: --build-dir needs a directory" >&2; exit 2; }
      build_dir=$2
      shift
      ;;
    -j | --jobs)
      [[ $# -ge 2 ]] || { echo "test.sh: $1 needs a number" >&2; exit 2; }
      test_jobs=$2
      shift
      ;;
    --)
      shift
      ctest_args=("$@")
      break
      ;;
    -h | --help) usage; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

scripts/build.sh --build-dir "$build_dir" "${build_opts[@]}"

echo "test.sh: ctest --test-dir $build_dir --output-on-failure -j $test_jobs ${ctest_args[*]}"
status=0
ctest --test-dir "$build_dir" --output-on-failure -j "$test_jobs" "${ctest_args[@]}" || status=$?
echo "test.sh: ctest exited with $status"
exit "$status"
