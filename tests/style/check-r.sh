#!/usr/bin/env bash
# Lints the R code of the tree with lintr under the project's configuration (.lintr at the
# root): every tracked *.R file and every tracked file that starts with an Rscript shebang
# (the programs rplot/plot-netperfmeter-results and -summary); the files as lib.sh's tree_files
# lists them. Prints each finding as FILE:LINE:COL: LINTER: MESSAGE (FILE relative to the root).
#   check-r.sh SOURCE_DIR
# Exits 0 when there is no finding, 1 when there is one (or lintr fails), 77 when Rscript or the
# R package lintr is missing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

style_start check-r.sh Rscript r-base-core "$@"
if ! Rscript -e 'quit(save = "no", status = if (requireNamespace("lintr", quietly = TRUE)) 0 else 1)' \
  >/dev/null 2>&1; then
  echo "SKIP: the R package lintr is not installed (apt-get install r-cran-lintr)"
  exit 77
fi
cd "$src"
[[ -f .lintr ]] || { echo "FAIL: $src/.lintr (the lintr configuration) is missing" >&2; exit 1; }
style_files "R files" '*.R' '^#!.*[/[:space:]]Rscript([[:space:]]|$)'

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
