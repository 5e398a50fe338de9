#!/usr/bin/env bash
# The C and C++ of the tree against its clang-format styles: .clang-format at the root (C++ and
# the userland C), src/cc/.clang-format (kernel C: src/cc, src/lab, every *.bpf.c, tests/cc's C)
# and dissectors/.clang-format (Wireshark's C); the files as lib.sh's tree_files lists them.
#   check-cxx.sh SOURCE_DIR        prints each file that is not formatted, with the first lines
#                                  of its difference; exits 1 if there is one, 77 without
#                                  clang-format, 0 otherwise
#   FIX=1 check-cxx.sh SOURCE_DIR  formats them in place
set -euo pipefail
shopt -s extglob
. "$(dirname "$0")/lib.sh"

style_start check-cxx.sh clang-format clang-format "$@"
style_files "C or C++ files" '*.@(cc|h|c)' ''
cd "$src"

# The style file of one path: the kernel style for kernel C outside src/cc, otherwise the
# nearest .clang-format (clang-format's own search).
style_of() {
  case $1 in
    *.bpf.c | tests/cc/*.c) echo "file:src/cc/.clang-format" ;;
    *) echo file ;;
  esac
}

bad=0
for path in "${files[@]}"; do
  style=$(style_of "$path")
  if [[ ${FIX:-} == 1 ]]; then
    clang-format --style="$style" -i "$path"
  elif ! difference=$(clang-format --style="$style" "$path" | diff -u "$path" -); then
    bad=$((bad + 1))
    echo "$path: not formatted (clang-format --style=$style -i $path):"
    sed -n '3,12p' <<<"$difference"
  fi
done
if ((bad)); then
  echo "$bad of ${#files[@]} files are not formatted"
  exit 1
fi
echo "${#files[@]} files checked"
