# shellcheck shell=bash
# Shared by the style checks (check-*.sh): the command line, the tool check and the list of the
# tree's files of one language.

# style_start USAGE TOOL PACKAGE: checks the one argument (the source directory: sets $src, its
# absolute path) and that TOOL is installed (otherwise SKIP, exit 77, the package named).
style_start() {
  local usage=$1 tool=$2 package=$3
  shift 3
  if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: $usage SOURCE_DIR" >&2
    exit 1
  fi
  src=$(cd "$1" && pwd -P)
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed (apt-get install $package)"
    exit 77
  fi
}

# tree_files: the files of the tree, NUL-separated, relative to it: git's list in a git checkout;
# elsewhere (a source tarball) every file, without .git and build trees (directories with a
# CMakeCache.txt).
tree_files() {
  if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" == "$src" ]; then
    git -C "$src" ls-files -z
  else
    (cd "$src" && find . \( -type d \( -name .git -o -exec test -e '{}/CMakeCache.txt' \; \) \) -prune \
      -o -type f -print0 | sed -z 's|^\./||')
  fi
}

# style_files WHAT SUFFIX_GLOB SHEBANG_REGEX [EXCLUDED_GLOB...]: sets the array `files` to the
# tree's files whose name matches SUFFIX_GLOB or whose first line matches SHEBANG_REGEX (an empty
# regex: none by their first line), without those matching an EXCLUDED_GLOB; fails, saying so,
# when there is none (WHAT names them).
style_files() {
  local what=$1 suffix=$2 shebang=$3 f first excluded
  shift 3
  files=()
  while IFS= read -r -d '' f; do
    [ -f "$src/$f" ] || continue  # deleted but not yet committed
    for excluded in "$@"; do
      # shellcheck disable=SC2053  # a glob, on purpose
      [[ $f == $excluded ]] && continue 2
    done
    # shellcheck disable=SC2053
    if [[ $f == $suffix ]]; then
      files+=("$f")
      continue
    fi
    [ -n "$shebang" ] || continue
    first=""
    IFS= read -r -n 200 first <"$src/$f" || true  # the first line (200 characters at most)
    if [[ $first =~ $shebang ]]; then
      files+=("$f")
    fi
  done < <(tree_files)
  if [ ${#files[@]} -eq 0 ]; then
    echo "no $what found in $src" >&2
    exit 1
  fi
}
