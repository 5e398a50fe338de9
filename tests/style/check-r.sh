#!/usr/bin/env bash
# Lints the R code of the tree with lintr under the project's configuration (.lintr at the
# root): every tracked *.R file and every tracked file that starts with an Rscript shebang
# (the programs rplot/plot-netperfmeter-results and -summary). Prints each finding as
# FILE:LINE:COL: LINTER: MESSAGE (FILE relative to the root).
# Usage: check-r.sh [SOURCE_DIR]   (default: the tree this script is in)
# Exits 0 when there is no finding, 1 when there is one (or lintr fails), 77 when Rscript,
# the R package lintr or the tree's git metadata (the list of files) is missing.
set -euo pipefail

src=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$src"

skip() { echo "SKIP: $*"; exit 77; }

command -v Rscript >/dev/null 2>&1 || skip "Rscript is missing (Debian: r-base-core)"
Rscript -e 'quit(save = "no", status = if (requireNamespace("lintr", quietly = TRUE)) 0 else 1)' \
  >/dev/null 2>&1 || skip "the R package lintr is missing (Debian: r-cran-lintr)"
command -v git >/dev/null 2>&1 || skip "git is missing: the R files are the ones git ls-files lists"
if ! err=$(git rev-parse --is-inside-work-tree 2>&1 >/dev/null); then
  skip "$src is not a git work tree, the R files are the ones git ls-files lists (git: ${err%%$'\n'*})"
fi
[[ -f .lintr ]] || { echo "FAIL: $src/.lintr (the lintr configuration) is missing" >&2; exit 1; }

# The tracked R files: *.R, and the scripts whose first line is an Rscript shebang.
shebang='^#!.*[/[:space:]]Rscript([[:space:]]|$)'
files=()
while IFS= read -r -d '' f; do
  [[ -f $f ]] && files+=("$f")
done < <(git ls-files -z -- '*.R')
while IFS= read -r -d '' f; do
  [[ $f == *.R || ! -f $f ]] && continue
  first=$(head -n 1 -- "$f")
  if [[ $first =~ $shebang ]]; then files+=("$f"); fi
done < <(git grep -z -l -I -E '^#!.*Rscript' -- . || true)
((${#files[@]})) || { echo "FAIL: no R files found in $src" >&2; exit 1; }

# lint() of each file, with the root's .lintr whatever the file's directory. The R code exits
# 0 (clean), 1 (findings) or 2 (lintr failed: a broken configuration, an unreadable file).
status=0
# The $ in the single quotes are R's.
# shellcheck disable=SC2016
Rscript -e '
  options(lintr.linter_file = normalizePath(".lintr"), warn = 1)
  files <- commandArgs(TRUE)
  found <- 0L
  ok <- tryCatch({
    for (f in files) {
      for (l in lintr::lint(f)) {
        found <- found + 1L
        cat(sprintf("%s:%d:%d: %s: %s\n", f, l$line_number, l$column_number, l$linter,
                    gsub("[\r\n]+", " ", l$message)))
      }
    }
    TRUE
  }, error = function(e) {
    cat("FAIL: lintr: ", gsub("[\r\n]+", " ", conditionMessage(e)), "\n", sep = "", file = stderr())
    FALSE
  })
  if (ok && found) cat(found, "lintr finding(s) in", length(files), "R files\n", file = stderr())
  quit(save = "no", status = if (!ok) 2L else if (found) 1L else 0L)
' "${files[@]}" || status=$?

case $status in
  0) echo "lintr: ${#files[@]} R files, no findings" ;;
  1) exit 1 ;;
  *) echo "FAIL: lintr did not finish (Rscript exit status $status)" >&2; exit 1 ;;
esac
