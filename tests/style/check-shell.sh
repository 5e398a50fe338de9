#!/usr/bin/env bash
# ShellCheck on the tree's shell scripts, with the tree's .shellcheckrc: every tracked *.sh and
# every tracked file with an sh or bash shebang, without the Jinja templates (*.j2) and
# packaging/debian/rules (a Makefile). Runs `shellcheck -x -S warning` from the tree's root, so
# that the sourced test libraries are found. The files are git's list in a git checkout;
# elsewhere (a source tarball) every file, without .git and build trees (directories with a
# CMakeCache.txt).
#   check-shell.sh SOURCE_DIR
# Prints the findings, one per line (FILE:LINE:COLUMN: SEVERITY: message [SCnnnn]); exits 1 when
# there is any, 77 (skipped) when shellcheck is not installed, 0 otherwise.
set -euo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: check-shell.sh SOURCE_DIR" >&2
  exit 1
fi
src=$(cd "$1" && pwd -P)
if ! command -v shellcheck >/dev/null 2>&1; then
  echo "SKIP: shellcheck is not installed (apt-get install shellcheck)"
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
  case $f in
    *.j2 | packaging/debian/rules) continue ;;
  esac
  [ -f "$src/$f" ] || continue  # deleted but not yet committed
  if [[ $f == *.sh ]]; then
    files+=("$f")
    continue
  fi
  first=""
  IFS= read -r -n 200 first <"$src/$f" || true  # the first line (200 characters at most)
  if [[ $first =~ ^\#![[:space:]]*(/usr)?/bin/(env[[:space:]]+)?(ba)?sh([[:space:]]|$) ]]; then
    files+=("$f")
  fi
done < <(tracked_files)
if [ ${#files[@]} -eq 0 ]; then
  echo "no shell scripts found in $src" >&2
  exit 1
fi

cd "$src"
if shellcheck -x -S warning -f gcc -- "${files[@]}"; then
  exit 0
fi
exit 1
