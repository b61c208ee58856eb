#!/usr/bin/env bash
# Installs the Debian packages listed in scripts/packages.txt that are not installed yet.
# Idempotent and silent when nothing is missing; needs root (or sudo) only when it installs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  cat <<'USAGE'
Usage: scripts/setup.sh [--help]

Installs every Debian package mtnlg-train needs (listed in scripts/packages.txt) that is not
installed yet, with apt-get install --no-install-recommends. Prints nothing when all are
present. Runs as root, or through sudo when available.
USAGE
}

case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") ;;
  *) echo "setup.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

# One package per line; '#' starts a comment.
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' scripts/packages.txt | grep -v '^$')

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "setup.sh: missing packages (${missing[*]}) and not root; rerun as root" >&2
    exit 1
  fi
fi

echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt/dpkg run (a concurrent setup) instead of failing on its lock.
apt_opts=(-o DPkg::Lock::Timeout=600)
"${sudo[@]}" apt-get "${apt_opts[@]}" update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}"
