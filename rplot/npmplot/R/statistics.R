# Means, t-intervals, grouping and row filters.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# Mean and confidence interval from the t-distribution (as t.test()) of a numeric vector.
# One value: no interval (NA bounds); zero variance: the interval collapses to the mean.
npm_mean_ci <- function(v, level = 0.95) {
  v <- v[!is.na(v)]
  n <- length(v)
  m <- if (n) mean(v) else NA_real_
  s <- if (n > 1L) sd(v) else NA_real_
  h <- if (n > 1L) qt((1 + level) / 2, df = n - 1L) * s / sqrt(n) else NA_real_
  list(N = n, Mean = m, SD = s, Lower = m - h, Upper = m + h)
}

# Mean, standard deviation and t-interval of column y for every combination of `by`.
npm_summarise <- function(data, y, by = character(0), level = 0.95) {
  data <- as.data.table(data)
  npm_require_columns(data, c(y, by))
  if (!is.numeric(level) || length(level) != 1L || is.na(level) || level <= 0 || level >= 1)
    npm_stop("confidence level must be between 0 and 1 (exclusive), got %s", format(level))
  if (!is.numeric(data[[y]])) npm_stop("column %s is not numeric", y)
  by <- unique(by)
  res <- if (length(by)) data[, npm_mean_ci(.SD[[1L]], level), by = by, .SDcols = y]
         else data[, npm_mean_ci(.SD[[1L]], level), .SDcols = y]
  if (length(by)) setorderv(res, by)
  res[]
}

npm_require_columns <- function(data, cols) {
  cols <- unique(cols[!is.na(cols) & cols != ""])
  missing <- setdiff(cols, names(data))
  if (length(missing))
    npm_stop("no column %s in the table (columns: %s)",
             paste(missing, collapse = ", "), paste(names(data), collapse = ", "))
  invisible(TRUE)
}

# Keep the rows for which an R expression over the columns is TRUE, e.g.
# 'Gamma != "cmtrpv1" & Flow == 0'. The expression is the user's own command line.
npm_filter <- function(data, expr) {
  data <- as.data.table(data)
  if (is.null(expr) || length(expr) == 0L || all(is.na(expr)) || identical(expr, "")) return(data)
  e <- tryCatch(parse(text = expr, keep.source = FALSE),
                error = function(err) npm_stop("cannot parse filter expression: %s", expr))
  if (length(e) != 1L) npm_stop("the filter must be one expression: %s", expr)
  keep <- tryCatch(eval(e[[1L]], envir = data, enclos = baseenv()),
                   error = function(err) npm_stop("filter %s failed: %s", expr, conditionMessage(err)))
  if (!is.logical(keep) || !(length(keep) %in% c(1L, nrow(data))))
    npm_stop("filter %s must give TRUE/FALSE per row", expr)
  keep <- rep_len(keep, nrow(data))
  data[!is.na(keep) & keep]
}
