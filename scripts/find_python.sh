#!/usr/bin/env bash
# `scripts/find_python.sh 3.X` prints the path of an interpreter for Python 3.X: python3.X on PATH,
# else pyenv's (whose shim for a version it has not selected fails). Exits 1 when there is none.
set -euo pipefail
version=${1:?usage: scripts/find_python.sh 3.X}
for candidate in "python$version" "$(pyenv root 2>/dev/null)/versions/$version"*/bin/"python$version"; do
  if "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != tuple(map(int, sys.argv[1].split("."))))' \
    "$version" >/dev/null 2>&1; then
    command -v "$candidate"
    exit 0
  fi
done
echo "Python $version not found" >&2
exit 1
