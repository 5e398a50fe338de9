# Opening result files: plain, gzip, bzip2 or xz, told apart by their content.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# Open a text file for reading; bzip2, gzip and xz are detected from the content.
npm_open <- function(path, what = "file") {
  npm_check_readable(path, what)
  con <- tryCatch(file(path, open = "rt"),
                  error = function(e) npm_stop("cannot open %s %s: %s", what, path,
                                               conditionMessage(e)))
  con
}

# Why a file gave no lines: really empty, or compressed data that is cut short.
npm_empty_reason <- function(path) {
  if (isTRUE(file.info(path)$size > 0))
    "gives no text (a truncated or corrupt compressed file?)"
  else "is empty"
}

npm_read_lines <- function(path, what = "file") {
  con <- npm_open(path, what)
  on.exit(close(con))
  tryCatch(readLines(con, warn = FALSE, encoding = "UTF-8"),
           error = function(e) npm_stop("cannot read %s %s: %s", what, path, conditionMessage(e)),
           warning = function(w) npm_stop("cannot read %s %s: %s", what, path, conditionMessage(w)))
}
