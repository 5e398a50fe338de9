# createsummary and combinesummaries tables.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# Read a createsummary/combinesummaries table (plain, .bz2, .gz, .xz; within the bound of
# text inputs, see npm_max_input_size()): header line,
# whitespace-separated fields, "quoted" values, optional leading line numbers.
# createsummary --csv tables (*.csv[.bz2]) are comma-separated; sep overrides.
npm_read_summary <- function(path, sep = NULL) {
  if (is.null(sep))
    sep <- if (grepl("\\.csv(\\.(bz2|gz|xz))?$", path, ignore.case = TRUE)) "," else ""
  lines <- npm_read_lines(path, "table")
  if (length(lines) == 0L) npm_stop("table %s %s", path, npm_empty_reason(path))
  con <- textConnection(lines)
  on.exit(close(con))
  d <- tryCatch(
    read.table(con, header = TRUE, quote = "\"", comment.char = "", sep = sep,
               check.names = FALSE, stringsAsFactors = FALSE, strip.white = TRUE),
    error = function(e) {
      if (grepl("no lines available|first five rows are empty", conditionMessage(e)))
        npm_stop("table %s %s", path, npm_empty_reason(path))
      npm_stop("cannot parse table %s: %s", path, conditionMessage(e))
    },
    warning = function(w) npm_stop("cannot parse table %s: %s", path, conditionMessage(w)))
  if (nrow(d) == 0L) npm_stop("table %s has no rows", path)
  if ("Split" %in% names(d) && all(is.na(d$Split))) d$Split <- ""
  d <- as.data.table(d)
  if (anyDuplicated(names(d))) npm_stop("table %s has duplicate column names", path)
  d
}
