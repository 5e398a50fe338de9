#!/usr/bin/env bash
# The C and C++ of the tree against its clang-format styles: .clang-format at the root (C++ and
# the userland C), src/cc/.clang-format (kernel C: src/cc, src/lab, every *.bpf.c, tests/cc's C)
# and dissectors/.clang-format (Wireshark's C). Prints each file that is not formatted with the
# first lines of its difference; exits 1 if there is one, 77 without clang-format.
#   tests/style/check-cxx.sh SOURCE_DIR [--fix]
set -euo pipefail
src=${1:?usage: check-cxx.sh SOURCE_DIR [--fix]}
fix=${2:-}
cd "$src"
formatter=$(command -v clang-format || command -v clang-format-14 || true)
if [[ -z $formatter ]]; then
  echo "SKIP: clang-format is not installed (Debian: clang-format)"
  exit 77
fi

# The style file of one path: the kernel style for kernel C outside src/cc, otherwise the
# nearest .clang-format (clang-format's own search).
style_of() {
  case $1 in
    *.bpf.c | tests/cc/*.c) echo "file:src/cc/.clang-format" ;;
    *) echo file ;;
  esac
}

bad=0 checked=0
while IFS= read -r -d '' path; do
  checked=$((checked + 1))
  style=$(style_of "$path")
  if [[ $fix == --fix ]]; then
    "$formatter" --style="$style" -i "$path"
    continue
  fi
  if ! difference=$("$formatter" --style="$style" "$path" | diff -u "$path" -); then
    bad=$((bad + 1))
    echo "not formatted: $path (clang-format --style=$style -i $path)"
    sed -n '3,12p' <<<"$difference"
  fi
done < <(git ls-files -z -- '*.cc' '*.h' '*.c')
if [[ $fix == --fix ]]; then
  echo "$checked files formatted in place"
  exit 0
fi
if ((bad)); then
  echo "$bad of $checked files are not formatted"
  exit 1
fi
echo "all $checked files are formatted"
