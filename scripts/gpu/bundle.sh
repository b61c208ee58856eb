#!/usr/bin/env bash
# Downloads (here, where apt works) every Debian package that scripts/gpu/check.sh needs to build
# mtnlg-train on a GPU machine that reaches no package registry. The .debs land in
# scripts/gpu/debs/ (git-ignored); carry that folder to the GPU machine with the tree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

usage() {
  cat <<'USAGE'
Usage: scripts/gpu/bundle.sh [--help]

Downloads with `apt-get download` each Debian package listed in scripts/gpu/packages.txt into
scripts/gpu/debs/ (git-ignored), skipping those already there. Idempotent; needs no root
(apt-get update runs only when a package is not found, through sudo when not root).
Then, on the GPU machine: scripts/gpu/check.sh (see its --help).
USAGE
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") ;;
  *) echo "bundle.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' packages.txt | grep -v '^$')
mkdir -p debs
cd debs
missing=()
for pkg in "${packages[@]}"; do
  compgen -G "${pkg}_*.deb" >/dev/null || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
  echo "bundle.sh: all ${#packages[@]} packages are in scripts/gpu/debs/ ($(du -sh . | cut -f1))"
  exit 0
fi
if ! apt-get download "${missing[@]}" >/dev/null 2>&1; then
  # A package list that was never fetched (a fresh container): update once, then retry.
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  apt-get download "${missing[@]}"
fi
echo "bundle.sh: ${#packages[@]} packages in scripts/gpu/debs/ ($(du -sh . | cut -f1))"
