# Errors a user can cause, and small helpers every part uses.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

`%||%` <- function(a, b) if (is.null(a)) b else a

# Signal an error the user can fix: one line, no traceback in the programs.
npm_stop <- function(fmt, ...) {
  msg <- if (...length()) sprintf(fmt, ...) else fmt
  stop(structure(class = c("npm_error", "error", "condition"),
                 list(message = msg, call = NULL)))
}

npm_warn <- function(fmt, ...) {
  msg <- if (...length()) sprintf(fmt, ...) else fmt
  warning(structure(class = c("npm_warning", "warning", "condition"),
                    list(message = msg, call = NULL)))
}

# Check that a file exists and is readable; returns the path.
npm_check_readable <- function(path, what = "file") {
  if (!is.character(path) || length(path) != 1L || is.na(path) || path == "")
    npm_stop("no %s given", what)
  if (!file.exists(path)) npm_stop("%s %s does not exist", what, path)
  if (dir.exists(path)) npm_stop("%s %s is a directory", what, path)
  if (file.access(path, 4L) != 0L) npm_stop("%s %s is not readable", what, path)
  path
}
