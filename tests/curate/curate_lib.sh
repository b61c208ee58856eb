# Sourced by the curate stage tests (tests/curate/*_test.sh) after `set -uo pipefail`, with
#   curate_setup BUILD_DIR SOURCE_DIR
# which sets build and src (absolute), curate (the mtnlg-curate under test, also cli_expect.sh's
# bin), py (Debian's python3), ref (tests/reference/curate_reference.py), makes a temporary
# directory tmp (removed at exit) and enters it, and sources tests/cli_expect.sh
# (check WHAT CMD..., expect STATUS PATTERN -- ARGS..., counted in passes and failures).
curate_setup() {
  build=$(cd "$1" && pwd)
  src=$(cd "$2" && pwd)
  curate=$build/mtnlg-curate
  bin=$curate
  py=/usr/bin/python3
  ref=$src/tests/reference/curate_reference.py
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cd "$tmp" || exit 1
  # shellcheck source=tests/cli_expect.sh
  source "$src/tests/cli_expect.sh"
}
