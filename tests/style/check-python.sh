#!/usr/bin/env bash
# flake8 on the tree's Python, with the tree's .flake8: every tracked *.py and every tracked file
# with a python3 shebang (src/lab/netperfmeter-lab.in). The files are git's list in a git
# checkout; elsewhere (a source tarball) every file, without .git and build trees (directories
# with a CMakeCache.txt).
#   check-python.sh SOURCE_DIR
# Prints the findings, one per line (FILE:LINE:COLUMN: CODE message); exits 1 when there is any,
# 77 (skipped) when flake8 is not installed, 0 otherwise.
set -euo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: check-python.sh SOURCE_DIR" >&2
  exit 1
fi
src=$(cd "$1" && pwd -P)
if ! command -v flake8 >/dev/null 2>&1; then
  echo "SKIP: flake8 is not installed (apt-get install flake8)"
  exit 77
fi

# tracked_files: the files of the tree, NUL-separated, relative to it.
tracked_files() {
  if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" == "$src" ]; then
    git -C "$src" ls-files -z
  else
    (cd "$src" && find . \( -type d \( -name .git -o -exec test -e '{}/CMakeCache.txt' \; \) \) -prune \
      -o -type f -print0 | sed -z 's|^\./||')
  fi
}

files=()
while IFS= read -r -d '' f; do
  [ -f "$src/$f" ] || continue  # deleted but not yet committed
  if [[ $f == *.py ]]; then
    files+=("$f")
    continue
  fi
  first=""
  IFS= read -r -n 200 first <"$src/$f" || true  # the first line (200 characters at most)
  if [[ $first =~ ^\#!.*[/\ ]python3?([[:space:]]|$) ]]; then
    files+=("$f")
  fi
done < <(tracked_files)
if [ ${#files[@]} -eq 0 ]; then
  echo "no Python files found in $src" >&2
  exit 1
fi

cd "$src"
if flake8 --config "$src/.flake8" -- "${files[@]}"; then
  exit 0
fi
exit 1
